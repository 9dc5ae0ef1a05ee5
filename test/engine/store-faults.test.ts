/**
 * Every fault of the file has a code: schema versions, read-only opens, a missing file, a
 * watcher poll that fails, errors crossing a thread. Real files throughout.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, readSync, readdirSync, statSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import {
  EngineError,
  type SqliteTaskStore,
  createSqliteStore,
  createTaskManager,
  fromThread,
  isEngineError,
  sqliteCode,
  storeError,
  toThread,
} from '../../src/engine/index.js';
import { MIGRATIONS } from '../../src/engine/sqlite/migrations.js';
import { operator, tempDir, waitFor } from '../helpers.js';

const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

/** A database file at `path` with these tasks, closed (no -wal left). */
async function seeded(path: string, titles: string[], userVersion?: number): Promise<void> {
  const store = createSqliteStore({ path });
  await createTaskManager({ store }).createTasks(titles.map((title) => ({ title })), operator);
  if (userVersion !== undefined) store.db.pragma(`user_version = ${userVersion}`);
  await store.close();
}

describe('store faults are named', () => {
  it('a file from a newer schema is refused STORE_TOO_NEW, naming both versions, before anything is written', async () => {
    const dir = tempDir();
    const path = join(dir, 'newer.db');
    await seeded(path, ['kept'], 99);
    const before = digest(path);
    for (const readonly of [false, true]) {
      const err = thrown(() => createSqliteStore({ path, readonly }));
      expect(isEngineError(err) && err.code, `readonly ${readonly}`).toBe('STORE_TOO_NEW');
      expect((err as Error).message).toContain(path);
      expect((err as Error).message).toContain('version 99');
      expect((err as Error).message).toContain(`version ${MIGRATIONS.length}`);
      expect((err as EngineError).data).toMatchObject({ path, schema_version: 99, known_version: MIGRATIONS.length });
    }
    expect(digest(path), 'the file is byte for byte as it was').toBe(before);
    // A read-only connection leaves SQLite's empty -wal and -shm, as any reader of a WAL file does.
    expect(readdirSync(dir).filter((f) => !/-(shm|wal)$/.test(f))).toEqual(['newer.db']);
    expect(existsSync(`${path}-wal`) ? statSync(`${path}-wal`).size : 0).toBe(0);
  });

  it('a read-only store reads a live file, refuses writes STORE_READONLY, and creates nothing for a missing one', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const writer = createTaskManager({ store: createSqliteStore({ path }) });
    await writer.createTask({ title: 'one' }, operator);
    const reader = createSqliteStore({ path, readonly: true });
    try {
      const tm = createTaskManager({ store: reader });
      expect((await tm.findTasks({})).map((t) => t.title)).toEqual(['one']);
      await writer.createTask({ title: 'two' }, operator);
      expect((await tm.findTasks({})).map((t) => t.title)).toEqual(['one', 'two']);
      const err = await tm.createTask({ title: 'three' }, operator).catch((e: unknown) => e);
      expect(isEngineError(err) && err.code).toBe('STORE_READONLY');
      expect((err as Error).message).toContain(path);
    } finally {
      await reader.close();
      await writer.close();
    }

    const missing = join(dir, 'not', 'there.db');
    const err = thrown(() => createSqliteStore({ path: missing, readonly: true }));
    expect(isEngineError(err) && err.code).toBe('STORE_NOT_FOUND');
    expect((err as Error).message).toContain(missing);
    expect(existsSync(join(dir, 'not')), 'not even the folder').toBe(false);
  });

  it('a read-only open of an older schema migrates it, as opening always did', async () => {
    const path = join(tempDir(), 'old.db');
    const old = new Database(path);
    old.pragma('journal_mode = WAL');
    for (const step of MIGRATIONS.slice(0, -1)) old.exec(step);
    old.pragma(`user_version = ${MIGRATIONS.length - 1}`);
    old.close();
    const store = createSqliteStore({ path, readonly: true });
    try {
      expect(store.db.pragma('user_version', { simple: true })).toBe(MIGRATIONS.length);
      expect(await createTaskManager({ store }).findTasks({})).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('a file that is not a database is STORE_CORRUPT, naming the file', async () => {
    const path = join(tempDir(), 'garbage.db');
    const fd = openSync(path, 'w');
    writeSync(fd, Buffer.alloc(8192, 0x42));
    closeSync(fd);
    for (const readonly of [false, true]) {
      const err = thrown(() => createSqliteStore({ path, readonly }));
      expect(isEngineError(err) && err.code).toBe('STORE_CORRUPT');
      expect((err as Error).message).toMatch(new RegExp(`^open on ${path}: the database is corrupt.*SQLITE_NOTADB`));
    }
  });

  it('the change watcher survives a poll that fails: one line, retried, and the store stops writing to the corrupt file', async () => {
    const path = join(tempDir(), 'tasks.db');
    const lines: string[] = [];
    const store = createSqliteStore({ path, log: (l) => lines.push(l), watchFallbackMs: 10 });
    const tm = createTaskManager({ store });
    await tm.createTask({ title: 'one' }, operator);
    let seen = 0;
    const unwatch = store.watch(() => void seen++);
    // A second connection commits and folds the log back into the file; in the same tick
    // (no poll in between) the file's header is overwritten. The watcher's next data_version
    // read re-reads page 1 from the file and meets the damage.
    const other: SqliteTaskStore = createSqliteStore({ path });
    await createTaskManager({ store: other }).createTask({ title: 'two' }, operator);
    const header = Buffer.alloc(100);
    other.db.pragma('wal_checkpoint(TRUNCATE)');
    const fd = openSync(path, 'r+');
    readSync(fd, header, 0, 100, 0);
    writeSync(fd, Buffer.alloc(100, 0x55), 0, 100, 0);
    seen = 0;

    await waitFor(() => lines.some((l) => /change watcher failed/.test(l)), 5000, 'the watcher to report the failed poll');
    const first = lines.find((l) => /change watcher failed/.test(l))!;
    expect(first).toMatch(new RegExp(`^${path}: change watcher failed: STORE_CORRUPT: watch on ${path}: the database is corrupt`));
    expect(store.fault?.code).toBe('STORE_CORRUPT');
    const refused = await tm.createTask({ title: 'refused' }, operator).catch((e: unknown) => e);
    expect(isEngineError(refused) && refused.code).toBe('STORE_CORRUPT');

    // The header put back and a commit (which makes the connection drop the page it cached):
    // the poll reads again and the listener hears of the commit.
    writeSync(fd, header, 0, 100, 0);
    closeSync(fd);
    await createTaskManager({ store: other }).createTask({ title: 'three' }, operator);
    await waitFor(() => lines.some((l) => /change watcher works again/.test(l)), 10_000, 'the watcher to recover');
    await waitFor(() => seen > 0, 5000, 'the listener to hear of a commit');
    expect(lines.filter((l) => /change watcher failed/.test(l)).length).toBeLessThanOrEqual(2);
    unwatch();
    await other.close();
    await store.close();
  });

  it('an error crosses a thread readable: a SqliteError is rebuilt as the engine error it maps to', async () => {
    const path = join(tempDir(), 'garbage.db');
    const fd = openSync(path, 'w');
    writeSync(fd, Buffer.alloc(4096, 0x42));
    closeSync(fd);
    // A real SqliteError, thrown in a real thread; posted the way piscina posts a failure.
    const worker = new Worker(
      `const { parentPort, workerData } = require('node:worker_threads');
       const Database = require(workerData.driver);
       try { new Database(workerData.path).pragma('user_version'); } catch (err) { parentPort.postMessage({ raw: err }); }`,
      { eval: true, workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), path } },
    );
    const { raw } = await new Promise<{ raw: unknown }>((resolve) => worker.once('message', resolve));
    await worker.terminate();
    // What today's daemon printed: a SqliteError cloned across a thread is an empty object.
    expect(raw).toEqual({ code: 'SQLITE_NOTADB' });
    expect(String(raw)).toBe('[object Object]');

    const memory = createSqliteStore({ path: ':memory:' });
    const sqliteErr = thrown(() => memory.db.prepare('SELECT * FROM no_such_table'));
    await memory.close();
    expect(sqliteCode(sqliteErr)).toBe('SQLITE_ERROR');
    expect(storeError(sqliteErr, path, 'x'), 'a bug of ours is not a fault of the file').toBe(sqliteErr);

    const named = storeError(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' }), path, 'claim');
    const crossed = fromThread(structuredClone(toThread(named)));
    expect(crossed).toBeInstanceOf(EngineError);
    expect((crossed as EngineError).toJSON()).toEqual({
      code: 'STORE_CORRUPT',
      message: `claim on ${path}: the database is corrupt; this process writes nothing more to it (restore it from a backup) (SQLITE_CORRUPT: database disk image is malformed)`,
      data: { path, sqlite_code: 'SQLITE_CORRUPT' },
    });
    const other = fromThread(structuredClone(toThread(new TypeError('boom'))));
    expect(other.message).toBe('boom');
  });

  it('maps every SQLite fault code to its STORE_ code', () => {
    const cases: Array<[string, string | undefined]> = [
      ['SQLITE_FULL', 'STORE_FULL'],
      ['SQLITE_READONLY', 'STORE_READONLY'],
      ['SQLITE_READONLY_DIRECTORY', 'STORE_READONLY'],
      ['SQLITE_READONLY_DBMOVED', 'STORE_REPLACED'],
      ['SQLITE_CORRUPT', 'STORE_CORRUPT'],
      ['SQLITE_CORRUPT_INDEX', 'STORE_CORRUPT'],
      ['SQLITE_NOTADB', 'STORE_CORRUPT'],
      ['SQLITE_IOERR_SHORT_READ', 'STORE_IO'],
      ['SQLITE_IOERR_FSYNC', 'STORE_IO'],
      ['SQLITE_CANTOPEN', 'STORE_IO'],
      ['SQLITE_BUSY', 'STORE_BUSY'],
      ['SQLITE_CONSTRAINT_UNIQUE', undefined],
      ['SQLITE_ERROR', undefined],
    ];
    for (const [code, expected] of cases) {
      const err = Object.assign(new Error('x'), { code });
      const named = storeError(err, '/db', 'write');
      expect(isEngineError(named) ? named.code : undefined, code).toBe(expected);
    }
  });
});
