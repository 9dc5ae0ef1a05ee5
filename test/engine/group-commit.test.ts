/**
 * Group commit (src/engine/sqlite/group-commit.ts): writes asked for in one turn of the event
 * loop share one transaction, each under its own savepoint. Commits are counted from the
 * file itself: the commit frames in its -wal (no checkpoint runs in these tests).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { EngineError, createSqliteStore, createTaskManager, createWriteLock } from '../../src/engine/index.js';
import { releaseWriteLock, tryWriteLock } from '../../src/engine/sqlite/write-lock.js';
import { startClaimer } from '../../src/workers/claimer.js';
import { faultReporter } from '../../src/engine/index.js';
import { operator, tempDir } from '../helpers.js';

/** The commits in a -wal file: frames of the current WAL generation whose commit field is set. */
function walCommits(path: string): number {
  const wal = readFileSync(`${path}-wal`);
  if (wal.length < 32) return 0;
  const pageSize = wal.readUInt32BE(8);
  const salts = [wal.readUInt32BE(16), wal.readUInt32BE(20)];
  let commits = 0;
  for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
    if (wal.readUInt32BE(at + 8) !== salts[0] || wal.readUInt32BE(at + 12) !== salts[1]) break;
    if (wal.readUInt32BE(at + 4) !== 0) commits++;
  }
  return commits;
}

function openGrouped(groupCommit = true, writeLock?: Int32Array) {
  const path = join(tempDir(), 'group.db');
  const store = createSqliteStore({ path, checkpoints: 'inline', groupCommit, writeLock });
  const tm = createTaskManager({ store });
  onTestFinished(() => tm.close());
  store.db.exec('CREATE TABLE scratch (x INTEGER)');
  return { path, store, tm };
}

/** A write of a row to the test's own table; `fail`: the engine refuses it after the insert. */
const insert = (store: ReturnType<typeof openGrouped>['store'], x: number, fail = false) =>
  store.write(`insert ${x}`, () => {
    store.db.prepare('INSERT INTO scratch (x) VALUES (?)').run(x);
    if (fail) throw new EngineError('VALIDATION_FAILED', `write ${x} refused after it inserted`);
    return x;
  });

describe('group commit', () => {
  for (const grouped of [true, false]) {
    it(`writes asked for in one turn ${grouped ? 'share one commit' : 'commit one by one without it'}; each keeps its own value, events and failure`, async () => {
      const { path, store, tm } = openGrouped(grouped);
      await tm.createTask({ title: 'before' }, operator);
      const before = walCommits(path);
      const asked = [
        tm.createTask({ title: 'one' }, operator),
        insert(store, 1),
        insert(store, 2, true),
        tm.createTask({ title: 'two' }, operator),
        insert(store, 3),
      ];
      const settled = await Promise.allSettled(asked);
      expect(walCommits(path) - before).toBe(grouped ? 1 : 4);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      expect((settled[2] as PromiseRejectedResult).reason).toMatchObject({ message: 'write 2 refused after it inserted' });
      // The refused write is rolled back to its savepoint; the others are in.
      expect(store.db.prepare('SELECT x FROM scratch ORDER BY rowid').pluck().all()).toEqual([1, 3]);
      const one = (settled[0] as PromiseFulfilledResult<{ task: { id: number; title: string } }>).value.task;
      const two = (settled[3] as PromiseFulfilledResult<{ task: { id: number; title: string } }>).value.task;
      expect([one.title, two.title]).toEqual(['one', 'two']);
      expect(two.id).toBe(one.id + 1);
      expect((settled[1] as PromiseFulfilledResult<{ value: number; events: unknown[] }>).value).toEqual({ value: 1, events: [] });
      // Each task has its own creation event, and only one.
      for (const t of [one, two]) expect((await tm.getTask(t.id)).events.map((e) => e.type)).toEqual(['task.created']);
    });
  }

  it("a write whose own code throws (a value too big to serialise) fails alone: the writes batched with it commit", async () => {
    const { path, store, tm } = openGrouped();
    await tm.createTask({ title: 'before' }, operator);
    const before = walCommits(path);
    const tooBig = () =>
      store.write('insert a value too big to serialise', () => {
        store.db.prepare('INSERT INTO scratch (x) VALUES (?)').run(99);
        throw new RangeError('Invalid string length');
      });
    const settled = await Promise.allSettled([insert(store, 1), tooBig(), tm.createTask({ title: 'after' }, operator), insert(store, 2)]);
    expect(settled.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(RangeError);
    expect(walCommits(path) - before).toBe(1);
    // Its own insert is rolled back to its savepoint; the others are in.
    expect(store.db.prepare('SELECT x FROM scratch ORDER BY rowid').pluck().all()).toEqual([1, 2]);
    expect((await tm.findTasks({})).map((t) => t.title).sort()).toEqual(['after', 'before']);
  });

  it('a write that meets a full disk aborts its whole batch: every write rejects STORE_FULL, none is kept, and the store writes again once there is room', async () => {
    const { path, store } = openGrouped();
    const pages = store.db.pragma('page_count', { simple: true }) as number;
    // The file may not grow past a few pages: SQLite answers SQLITE_FULL, and may roll back
    // the whole transaction, not just the write's savepoint.
    store.db.pragma(`max_page_count = ${pages + 3}`);
    const big = (x: number) =>
      store.write(`insert ${x} with 200 KB`, () => {
        store.db.prepare('INSERT INTO scratch (x) VALUES (?)').run(x);
        store.db.prepare('INSERT INTO scratch (x) VALUES (zeroblob(200000))').run();
        return x;
      });
    // (The disk-full recovery truncates the -wal: what was kept is read from the file.)
    const settled = await Promise.allSettled([insert(store, 1), big(2), insert(store, 3), insert(store, 4)]);
    expect(settled.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'ok'))).toEqual(['STORE_FULL', 'STORE_FULL', 'STORE_FULL', 'STORE_FULL']);
    const reader = new Database(path, { readonly: true });
    onTestFinished(() => {
      reader.close();
    });
    expect(reader.prepare('SELECT x FROM scratch').pluck().all()).toEqual([]);
    store.db.pragma('max_page_count = 1073741823');
    expect((await insert(store, 5)).value).toBe(5);
    expect(reader.prepare('SELECT x FROM scratch').pluck().all()).toEqual([5]);
  });

  it('a write that finds the file corrupt aborts its whole batch, and the store writes nothing more', async () => {
    const { store } = openGrouped();
    const corrupt = () =>
      store.write('read a damaged page', () => {
        throw Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' });
      });
    const settled = await Promise.allSettled([insert(store, 1), corrupt(), insert(store, 2)]);
    expect(settled.map((r) => (r.status === 'rejected' ? (r.reason as { code?: string }).code : 'ok'))).toEqual(['STORE_CORRUPT', 'STORE_CORRUPT', 'STORE_CORRUPT']);
    expect(store.db.prepare('SELECT x FROM scratch').pluck().all()).toEqual([]);
    await expect(insert(store, 3)).rejects.toMatchObject({ code: 'STORE_CORRUPT' });
  });

  it('a batch waits out another connection’s write lock, then commits whole', async () => {
    const { path, store, tm } = openGrouped();
    const before = walCommits(path);
    const other = new Database(path);
    onTestFinished(() => {
      other.close();
    });
    other.exec('BEGIN IMMEDIATE');
    const asked = Promise.all([tm.createTask({ title: 'a' }, operator), insert(store, 7), tm.createTask({ title: 'b' }, operator)]);
    setTimeout(() => other.exec('COMMIT'), 150);
    const [a, seven, b] = await asked;
    expect([a.task.title, seven.value, b.task.title]).toEqual(['a', 7, 'b']);
    expect((await tm.findTasks({})).length).toBe(2);
    expect(walCommits(path) - before).toBe(1);
  });

  it('while another thread of the process holds the write lock, writes asked for in later turns join the waiting batch: one commit', async () => {
    const lock = createWriteLock();
    const { path, store, tm } = openGrouped(true, lock);
    await tm.createTask({ title: 'before' }, operator);
    const before = walCommits(path);
    // Another thread writing (the process's lock held, as a daemon's other thread holds it).
    expect(tryWriteLock(lock)).toBe(true);
    const asked: Array<Promise<unknown>> = [];
    for (const title of ['one', 'two', 'three']) {
      asked.push(tm.createTask({ title }, operator), insert(store, asked.length));
      await new Promise((r) => setImmediate(r)); // the next turn: each pair would have been a batch of its own
    }
    releaseWriteLock(lock);
    await Promise.all(asked);
    expect((await tm.findTasks({})).map((t) => t.title).sort()).toEqual(['before', 'one', 'three', 'two']);
    expect(store.db.prepare('SELECT x FROM scratch ORDER BY rowid').pluck().all()).toEqual([0, 2, 4]);
    expect(walCommits(path) - before).toBe(1);
  });

  it('closing waits for the writes asked for: none is lost', async () => {
    const { path, store, tm } = openGrouped();
    const asked = [tm.createTask({ title: 'last words' }, operator), insert(store, 9)];
    await tm.close();
    await Promise.all(asked);
    const db = new Database(path, { readonly: true });
    expect(db.prepare('SELECT title FROM tasks').pluck().all()).toEqual(['last words']);
    expect(db.prepare('SELECT x FROM scratch').pluck().all()).toEqual([9]);
    db.close();
  });
});

describe('claim bursts', () => {
  it('ask for more claims at once while every claim finds a task (up to 16), and one at a time again after one finds nothing', async () => {
    let supply = 60;
    const bursts: number[] = [];
    let current = 0;
    let seen = 0;
    const started: number[] = [];
    const claimer = startClaimer<number>({
      hasRoom: () => true,
      room: () => 32,
      claim: async () => {
        // Claims asked for in one burst arrive before any of them settles.
        if (current === 0) queueMicrotask(() => (bursts.push(current), (current = 0)));
        current++;
        seen++;
        return supply > 0 ? supply-- : null;
      },
      start: (n) => started.push(n),
      report: faultReporter('claimer test', () => undefined),
      idleMs: 10,
    });
    await new Promise((r) => setTimeout(r, 100));
    supply = 5;
    await new Promise((r) => setTimeout(r, 50));
    claimer.stop();
    await claimer.done;
    expect(started.length).toBe(65);
    // 1 + 2 + 4 + 8 + 16 + 16 + 13 found of 16 … then single claims while idle.
    expect(bursts.slice(0, 7)).toEqual([1, 2, 4, 8, 16, 16, 16]);
    expect(bursts[7]).toBe(1);
    expect(seen).toBeGreaterThan(65);
  });
});
