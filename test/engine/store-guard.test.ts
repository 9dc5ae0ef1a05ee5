/**
 * The store guards its file: a -wal deleted under a live connection, a damaged page. Real
 * files, real daemon and CLI processes; the damage is done to the bytes on disk.
 */
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, realpathSync, rmSync, symlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type SqliteTaskStore, createSqliteStore, createTaskManager, isEngineError } from '../../src/engine/index.js';
import { cli, spawnCli } from '../cli/helpers.js';
import { operator, tempDir, waitFor } from '../helpers.js';
import { TEST_TOOLS, daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';

/**
 * The code of a `--json` CLI call's refusal: its stderr is one line, `{"error":{"code","message"}}`
 * (src/cli/main.ts), the code a store fault's.
 */
function storeCodeOf(stderr: string): string {
  expect(stderr.trim().split('\n'), stderr).toHaveLength(1);
  const { error } = JSON.parse(stderr) as { error: { code: string; message: string } };
  expect(error.code, stderr).toMatch(/^STORE_[A-Z_]+$/);
  expect(error.message, stderr).not.toMatch(/\[object Object\]|SqliteError|\n/);
  return error.code;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(() => new Error('expected a refusal'), (e: unknown) => e);
}

/** Every task the file holds now, by id, read by a fresh connection; and its integrity check. */
async function contents(path: string): Promise<{ titles: Map<number, string>; integrity: string }> {
  const store = createSqliteStore({ path });
  try {
    const integrity = (store.db.pragma('integrity_check') as Array<{ integrity_check: string }>).map((r) => r.integrity_check).join('; ');
    const tasks = await createTaskManager({ store }).findTasks({ limit: 1000 });
    return { titles: new Map(tasks.map((t) => [t.id, t.title])), integrity };
  } finally {
    await store.close();
  }
}

describe('the store guards its file', () => {
  it('a store whose -wal is deleted under it refuses every later write with STORE_REPLACED, and what the deleted log held is kept', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = createSqliteStore({ path, guardIntervalMs: 0 });
    const tm = createTaskManager({ store });
    const faults: string[] = [];
    store.onFault((f) => faults.push(f.code));
    const created = await tm.createTasks(Array.from({ length: 10 }, (_, i) => ({ title: `acknowledged ${i}` })), operator);
    expect(existsSync(`${path}-wal`)).toBe(true);

    rmSync(`${path}-wal`);
    const err = await rejection(tm.createTask({ title: 'after the deletion' }, operator));
    expect(isEngineError(err) && err.code).toBe('STORE_REPLACED');
    expect((err as Error).message).toContain(`${path}-wal was deleted`);
    expect((err as { data?: unknown }).data).toMatchObject({ path, file: `${path}-wal`, rescued: true });
    // Latched: the next write is refused too, without looking again.
    expect(await rejection(tm.createTask({ title: 'later' }, operator))).toBe(err);
    expect(store.fault).toBe(err);
    expect(faults).toEqual(['STORE_REPLACED']);
    await tm.close();

    const after = await contents(path);
    expect(after.integrity).toBe('ok');
    expect([...after.titles.values()].sort()).toEqual(created.map((c) => c.task.title).sort());
  });

  it('opened through a symlink, the store guards the real file: its -wal, its wake files, a deletion noticed', async () => {
    const dir = tempDir();
    const real = join(dir, 'real', 'tasks.db');
    mkdirSync(join(dir, 'real'));
    const link = join(dir, 'link.db');
    symlinkSync(real, link); // dangling until the store creates the file, as a first open does
    const store = createSqliteStore({ path: link, guardIntervalMs: 0 });
    const tm = createTaskManager({ store });
    expect(store.path).toBe(realpathSync(real));
    const unwatch = store.watch(() => undefined, 'work', 'default'); // a claimer's watch: its wake files
    await tm.createTask({ title: 'through the link' }, operator);
    // SQLite keeps the log beside the real file; the store's own files go there too.
    expect(existsSync(`${real}-wal`)).toBe(true);
    expect(readdirSync(dir).filter((f) => f.startsWith('link.db') && f !== 'link.db')).toEqual([]);
    expect(readdirSync(join(dir, 'real')).some((f) => f.startsWith('tasks.db-wake-'))).toBe(true);
    rmSync(`${real}-wal`);
    const err = await rejection(tm.createTask({ title: 'after the deletion' }, operator));
    expect(isEngineError(err) && err.code).toBe('STORE_REPLACED');
    unwatch();
    await tm.close();
  });

  it('the change watcher notices a deleted -wal at once, before any write', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = createSqliteStore({ path, guardIntervalMs: 3_600_000 });
    await createTaskManager({ store }).createTask({ title: 'one' }, operator);
    const unwatch = store.watch(() => undefined);
    rmSync(`${path}-wal`);
    await waitFor(() => store.fault, 5000, 'the guard to trip');
    expect(store.fault!.code).toBe('STORE_REPLACED');
    unwatch();
    await store.close();
    expect((await contents(path)).titles.size).toBe(1);
  });

  it('a database whose live connection lost its -wal is not opened into a second log (library and CLI)', async () => {
    const path = join(tempDir(), 'tasks.db');
    // This connection never looks (no watcher, no write): it stands for a process that has not noticed yet.
    const live = createSqliteStore({ path, guardIntervalMs: 3_600_000 });
    await createTaskManager({ store: live }).createTasks([{ title: 'a' }, { title: 'b' }], operator);
    rmSync(`${path}-wal`);

    let opened: SqliteTaskStore | undefined;
    const err = (() => {
      try {
        opened = createSqliteStore({ path });
      } catch (e) {
        return e;
      }
    })();
    await opened?.close();
    expect(isEngineError(err) && err.code).toBe('STORE_REPLACED');
    expect((err as Error).message).toContain(`${path}-wal is missing`);
    const r = await cli(path, 'task', 'create', '--title', 'c');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^taskloop: STORE_REPLACED: open on .*-wal is missing/);
    const asJson = await cli(path, '--json', 'task', 'create', '--title', 'c');
    expect(asJson.code).toBe(1);
    expect(storeCodeOf(asJson.stderr)).toBe('STORE_REPLACED');
    expect(existsSync(`${path}-wal`), 'no second log was started').toBe(false);

    // The live connection still holds the log; closing it folds the log back into the file.
    await live.close();
    const after = await contents(path);
    expect(after.integrity).toBe('ok');
    expect([...after.titles.values()].sort()).toEqual(['a', 'b']);
  });

  it('deleting the -wal under a running daemon: it stops with STORE_REPLACED and exits 1; every create that succeeded is in the file, every other failed with a code', async () => {
    const path = join(tempDir(), 'tasks.db');
    const creates: Array<{ title: string; id?: number; stderr?: string }> = [];
    const create = async (title: string) => {
      const r = await spawnCli(['--db', path, '--json', 'task', 'create', '--title', title, '--card', '-'], { input: JSON.stringify(daemonCard()) });
      creates.push(r.code === 0 ? { title, id: (JSON.parse(r.stdout) as { id: number }).id } : { title, stderr: r.stderr });
    };
    await create('first');
    const daemon = await startDaemonProcess(path, ['--lease', '2s']);
    for (let i = 0; i < 3; i++) await create(`before ${i}`);
    await daemon.waitForLine(/run \d+: completed/);

    rmSync(`${path}-wal`);
    for (let i = 0; i < 8 || daemon.child.exitCode === null; i++) {
      await create(`after ${i}`);
      if (i > 40) throw new Error(`the daemon did not stop:\n${daemon.lines.join('\n')}`);
    }
    expect(await daemon.exited).toBe(1);
    const stopping = daemon.lines.filter((l) => /stopping: STORE_REPLACED/.test(l));
    expect(stopping).toHaveLength(1);
    expect(stopping[0]).toContain(`${path}-wal was deleted`);
    expect(daemon.lines.at(-1)).toMatch(/^taskloop: STORE_REPLACED: /);
    expect(daemon.lines.join('\n')).not.toMatch(/\[object Object\]|INTERNAL|SqliteError|\n\s+at /);

    const after = await contents(path);
    expect(after.integrity).toBe('ok');
    const acknowledged = creates.filter((c) => c.id !== undefined);
    expect(acknowledged.length).toBeGreaterThan(4);
    const refused = creates.filter((c) => c.stderr !== undefined).map((c) => storeCodeOf(c.stderr!));
    console.log(`-wal deleted under a daemon: ${acknowledged.length} creates acknowledged (all in the file), ${refused.length} refused (${[...new Set(refused)].join(', ') || 'none'})`);
    for (const c of acknowledged) expect(after.titles.get(c.id!), `${c.title} (task ${c.id})`).toBe(c.title);
  });

  it('a damaged page: the daemon that meets it stops with STORE_CORRUPT and exits 1, reads say STORE_CORRUPT, and no daemon starts on the file', async () => {
    const path = join(tempDir(), 'tasks.db');
    const setup = createSqliteStore({ path });
    // Cards, not yet due: none is run, so their pages stay as written. Every look and claim of
    // a daemon reads tasks_delayed for the due ones (migration 13), and a list reads their rows.
    await createTaskManager({ store: setup }).createTasks(
      Array.from({ length: 300 }, (_, i) => ({ title: `later ${i} ${'x'.repeat(100)}`, card: daemonCard(), runAfter: Date.now() + 3_600_000 })),
      operator,
    );
    const leaves = setup.db.prepare("SELECT pageno FROM dbstat WHERE name = 'tasks' AND pagetype = 'leaf' ORDER BY pageno").pluck().all() as number[];
    const delayedPages = setup.db.prepare("SELECT pageno FROM dbstat WHERE name = 'tasks_delayed' ORDER BY pageno").pluck().all() as number[];
    const pageSize = setup.db.pragma('page_size', { simple: true }) as number;
    await setup.close();
    expect(leaves.length).toBeGreaterThan(3);

    const daemon = await startDaemonProcess(path, ['--lease', '1s']);
    const fd = openSync(path, 'r+');
    for (const page of [leaves[1]!, ...delayedPages]) writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, (page - 1) * pageSize);
    closeSync(fd);
    // Another process commits, so the daemon's threads read the pages from the file again.
    expect((await cli(path, 'task', 'create', '--title', 'a commit', '--queue', 'elsewhere')).code).toBe(0);

    expect(await daemon.exited).toBe(1);
    expect(daemon.lines.filter((l) => /stopping: STORE_CORRUPT/.test(l))).toHaveLength(1);
    expect(daemon.lines.at(-1)).toMatch(new RegExp(`^taskloop: STORE_CORRUPT: .* on ${path}: the database is corrupt`));
    expect(daemon.lines.join('\n')).not.toMatch(/\[object Object\]|INTERNAL|SqliteError|\n\s+at /);

    const list = await cli(path, 'task', 'list', '--limit', '1000');
    expect(list.code).toBe(1);
    expect(list.stderr).toMatch(new RegExp(`^taskloop: STORE_CORRUPT: list tasks on ${path}: the database is corrupt`));

    const refused = await spawnCli(['--db', path, 'daemon', '--tools', TEST_TOOLS]);
    expect(refused.code).toBe(1);
    expect(refused.stderr.split('\n')).toHaveLength(1);
    expect(refused.stderr).toMatch(new RegExp(`^taskloop: STORE_CORRUPT: quick_check on ${path}: the database is corrupt`));
  });
});
