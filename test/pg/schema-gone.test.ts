/**
 * taskloop's schema dropped under an open store (or a pooler that resets the session's
 * search path): every call is refused STORE_REPLACED, as on SQLite when the file is deleted
 * while open, and a daemon stops with it. It was the server's raw 42P01, which a daemon
 * logged and retried for ever.
 */
import { describe, expect, it } from 'vitest';
import { createStores, isEngineError } from '../../src/engine/index.js';
import { codeOf, freshManager, operator } from '../helpers.js';
import { daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';
import { admin, sql } from './sql.js';

/**
 * Drops the test's schema; if that waits on a lock for long, fails naming the sessions that
 * hold one (the drop needs every table's lock, so a session left idle in a transaction on
 * one would block it for ever).
 */
const dropSchema = async (url: string) => {
  const schema = new URL(url).searchParams.get('schema')!;
  try {
    await sql(url, `SET lock_timeout = '20s'; DROP SCHEMA ${schema} CASCADE`);
  } catch (err) {
    const holders = await sql(
      url,
      `SELECT a.pid, a.state, a.application_name, l.mode, left(a.query, 200) AS query FROM pg_locks l JOIN pg_stat_activity a USING (pid)
       JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND l.granted`,
      [schema],
    );
    throw new Error(`DROP SCHEMA ${schema}: ${(err as Error).message}; lock holders: ${JSON.stringify(holders)}`);
  }
};

describe('the schema dropped under an open store', () => {
  it('every call is refused STORE_REPLACED, naming what to look at', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 'before' }, operator);
    await dropSchema(tm.path);
    for (const call of [
      () => tm.findTasks({}),
      () => tm.getTask(task.id),
      () => tm.createTask({ title: 'after' }, operator),
      () => tm.claimTask({ agent: 'alice' }),
      () => tm.stats(),
    ]) {
      const err = await call().then(() => undefined, (e: unknown) => e);
      expect(isEngineError(err) && err.code, String(err)).toBe('STORE_REPLACED');
      expect((err as Error).message).toMatch(/relation "[\w.]+" does not exist \(taskloop's tables are not on this session's search path: was its schema dropped/);
    }
  });

  it("a store opened as `existing` (a daemon's thread) finds the schema gone and says so; it does not make it again", async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'before' }, operator);
    await dropSchema(tm.path);
    // A thread that started late: before, it made a new empty schema, and the daemon went on
    // in it (its heartbeat found its row gone, it registered anew, and nothing ever stopped it).
    const late = createStores({ database: tm.path, existing: true });
    const err = await late.ready.then(() => undefined, (e: unknown) => e);
    expect(isEngineError(err) && err.code, String(err)).toBe('STORE_REPLACED');
    expect((err as Error).message).toMatch(/^open on .*: schema t_\w+ is gone \(dropped since this process opened it\?\); it is not created again here$/);
    expect(await codeOf(late.store.findTasks({}))).toBe('STORE_REPLACED');
    await late.store.close();
    const schema = new URL(tm.path).searchParams.get('schema')!;
    expect(await sql(tm.path, 'SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).toEqual([]);
    // Opened as usual (the CLI, a daemon's main thread), the schema is made: a new database.
    const fresh = createStores({ database: tm.path });
    await fresh.ready;
    expect(await fresh.store.findTasks({})).toEqual([]);
    await fresh.store.close();
  });

  it('a daemon on it stops with STORE_REPLACED and exits 1', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'run first', card: daemonCard() }, operator);
    const daemon = await startDaemonProcess(tm.path, ['--workers', '2']);
    await daemon.waitForLine(/run \d+: completed/, 30_000);
    await dropSchema(tm.path);
    expect(await codeOf(tm.createTask({ title: 'after', card: daemonCard() }, operator))).toBe('STORE_REPLACED');
    const exit = await Promise.race([daemon.exited, new Promise<string>((r) => setTimeout(() => r('still running after 25 s'), 25_000).unref())]);
    if (exit !== 1) {
      // What every session of the server was doing while the daemon did not stop.
      const sessions = await admin(tm.path.replace(/[?&]schema=[^&]*/, ''), `SELECT pid, state, wait_event_type, wait_event, now() - xact_start AS xact_age, left(query, 160) AS query FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'`);
      expect(exit, `${daemon.lines.join('\n')}\nsessions: ${JSON.stringify(sessions)}`).toBe(1);
    }
    expect(daemon.lines.filter((l) => /stopping: STORE_REPLACED/.test(l))).toHaveLength(1);
    // A statement that finds no table says so; a thread that opens late finds no schema.
    expect(daemon.lines.at(-1)).toMatch(/^taskloop: STORE_REPLACED: .*(relation "[\w.]+" does not exist|schema t_\w+ is gone)/);
    expect(daemon.lines.join('\n')).not.toMatch(/INTERNAL|\n\s+at /);
  });

  it('a daemon whose schema is replaced under its name by another stops with STORE_REPLACED', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'run first', card: daemonCard() }, operator);
    const daemon = await startDaemonProcess(tm.path, ['--workers', '2']);
    await daemon.waitForLine(/run \d+: completed/, 30_000);
    // Another database put in its place under its name, at once (as a file renamed over a
    // SQLite database): a second schema made by a normal open, then the two swapped in one
    // transaction. Before, the daemon's heartbeat found its row gone, registered again, and
    // ran on in the other database; nothing else it does meets an error there.
    const schema = new URL(tm.path).searchParams.get('schema')!;
    const other = `${schema}_b`;
    const again = createStores({ database: tm.path.replace(`schema=${schema}`, `schema=${other}`) });
    await again.ready;
    await again.store.close();
    await sql(tm.path, `BEGIN; ALTER SCHEMA ${schema} RENAME TO ${schema}_gone; ALTER SCHEMA ${other} RENAME TO ${schema}; COMMIT`);
    const exit = await Promise.race([daemon.exited, new Promise<string>((r) => setTimeout(() => r('still running after 25 s'), 25_000).unref())]);
    expect(exit, daemon.lines.join('\n')).toBe(1);
    // Its heartbeat sees it, or, first under load, a thread that opens the store late does.
    expect(daemon.lines.join('\n')).toMatch(/stopping: STORE_REPLACED: (daemon heartbeat|open) on .*: schema t_\w+ is not the one this process opened \(dropped and made again\?\)/);
  });

  it('the heartbeat checks which schema it beats in only when asked (a daemon); a library worker, which cannot stop, keeps its leases', async () => {
    const tm = freshManager();
    const schema = new URL(tm.path).searchParams.get('schema')!;
    const mine = createStores({ database: tm.path });
    await mine.ready;
    await mine.runs.registerDaemon({ id: 'w1', host: 'h', pid: 1, agent: 'a', threads: 0 });
    expect(await mine.runs.heartbeatDaemon('w1', [], { sameStore: true })).toBe(true);
    const other = createStores({ database: tm.path.replace(`schema=${schema}`, `schema=${schema}_b`) });
    await other.ready;
    await other.store.close();
    await sql(tm.path, `BEGIN; ALTER SCHEMA ${schema} RENAME TO ${schema}_gone; ALTER SCHEMA ${schema}_b RENAME TO ${schema}; COMMIT`);
    expect(await codeOf(mine.runs.heartbeatDaemon('w1', [], { sameStore: true }))).toBe('STORE_REPLACED');
    // Unasked, the beat goes on in the schema it finds (its row is not there: register again).
    expect(await mine.runs.heartbeatDaemon('w1', [])).toBe(false);
    await mine.store.close();
  });

  it("a daemon's thread opens only the schema its main thread opened, not one made since under its name", async () => {
    const tm = freshManager();
    const schema = new URL(tm.path).searchParams.get('schema')!;
    const main = createStores({ database: tm.path });
    const oid = await main.schemaOid!();
    await main.store.close();
    // The same schema: the thread opens it.
    const same = createStores({ database: tm.path, existing: true, schemaOid: oid });
    await same.ready;
    await same.store.close();
    // Another at the same version renamed over it: before, a thread starting now joined it.
    const other = createStores({ database: tm.path.replace(`schema=${schema}`, `schema=${schema}_b`) });
    await other.ready;
    await other.store.close();
    await sql(tm.path, `BEGIN; ALTER SCHEMA ${schema} RENAME TO ${schema}_gone; ALTER SCHEMA ${schema}_b RENAME TO ${schema}; COMMIT`);
    const late = createStores({ database: tm.path, existing: true, schemaOid: oid });
    const err = await late.ready.then(() => undefined, (e: unknown) => e);
    expect(isEngineError(err) && err.code, String(err)).toBe('STORE_REPLACED');
    expect((err as Error).message).toMatch(/schema t_\w+ is not the one this process opened \(dropped and made again\?\); nothing was written$/);
    await late.store.close();
  });
});
