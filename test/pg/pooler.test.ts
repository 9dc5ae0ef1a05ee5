/**
 * taskloop behind a real PgBouncer (1.18, Debian's) in transaction mode, where each
 * transaction may run on another server session: no LISTEN, no prepared statement and no
 * session setting lasts past it. `wakeups=poll` is the mode for it (README, "Behind a
 * pooler"); PgBouncer 1.18 cannot pass startup `options` on, so taskloop's search path comes
 * from the pooler's `connect_query` (or the role's or database's settings). What else a
 * user may meet there is refused with STORE_UNAVAILABLE and what to change, never a raw error.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { createTaskManager, isEngineError } from '../../src/engine/index.js';
import { createPgStore } from '../../src/engine/postgres/task-store.js';
import { ROOT, operator, waitFor } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';
import { daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';
import { startBouncer } from './bouncer.js';
import { admin, sql } from './sql.js';

/** A database of its own on the test server (so its sessions can be counted), dropped after the test. */
async function ownDatabase(tag: string): Promise<string> {
  const database = `${tag}_${process.pid}_${Date.now()}`;
  await admin(inject('pgUrl'), `CREATE DATABASE ${database}`);
  onTestFinished(() => admin(inject('pgUrl'), `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).then(() => undefined));
  return database;
}

const SCHEMA = 'pooled';

/** A pooler in transaction mode whose database `tl` is `database`, with taskloop's search path set by its connect_query. */
const pathSetting = (database: string, poolSize: number) =>
  startBouncer(inject('pgUrl'), { ignoreOptions: true, poolSize, databases: { tl: { dbname: database, connectQuery: `SET search_path = ${SCHEMA}` } } });

describe('behind PgBouncer in transaction mode', () => {
  it('with wakeups=poll: two daemons drain what this process creates, each task once, on no more server sessions than the pool has, and a follower misses no event', async () => {
    const database = await ownDatabase('bounced');
    const bouncer = await pathSetting(database, 3);
    const url = bouncer.url('tl', `schema=${SCHEMA}&wakeups=poll`);
    const tm = createTaskManager({ store: createPgStore({ url }) });
    onTestFinished(() => tm.close());
    await tm.createTask({ title: 'first' }, operator);

    const follower = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', url, '--json', 'events', '--follow'], { stdio: ['ignore', 'pipe', 'pipe'] });
    onTestFinished(() => void follower.kill('SIGKILL'));
    let out = '';
    let err = '';
    follower.stdout.on('data', (b: Buffer) => (out += b.toString()));
    follower.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const followed = () => out.split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { id: number }).id);
    await waitFor(() => followed().length === 1, 10_000, `the follower's first event\n${err}`);

    const daemons = [await startDaemonProcess(url, ['--workers', '2']), await startDaemonProcess(url, ['--workers', '2'])];
    const N = 60;
    for (let b = 0; b < 3; b++) {
      await tm.createTasks(Array.from({ length: N / 3 }, (_, i) => ({ title: `pooled ${b}-${i}`, card: daemonCard() })), operator);
    }
    const sessions: number[] = [];
    await waitFor(
      async () => {
        const [row] = await admin(inject('pgUrl'), `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = '${database}'`);
        sessions.push(row!.n as number);
        return (await tm.stats()).byState.completed === N || undefined;
      },
      60_000,
      `${N} tasks completed\n${daemons.flatMap((d) => d.lines).join('\n')}\n${bouncer.log()}`,
    );
    // Two daemons, a follower and this store each keep a pool of clients; the server sees the pooler's three.
    expect(Math.max(...sessions)).toBeLessThanOrEqual(3);

    const direct = new URL(inject('pgUrl'));
    direct.pathname = `/${database}`;
    direct.searchParams.set('schema', SCHEMA);
    const runs = await sql<{ task_id: string; n: number }>(direct.toString(), "SELECT task_id, count(*)::int AS n FROM runs GROUP BY task_id");
    expect(runs).toHaveLength(N);
    expect(runs.every((r) => r.n === 1)).toBe(true); // nothing ran twice
    const all = await sql<{ id: string; type: string; task_id: string }>(direct.toString(), 'SELECT id, type, task_id FROM task_events ORDER BY id');
    const claims = all.filter((e) => e.type === 'task.claimed');
    expect(claims).toHaveLength(N);
    expect(new Set(claims.map((e) => e.task_id)).size).toBe(N);

    const ids = all.map((e) => Number(e.id));
    await waitFor(() => followed().length >= ids.length || undefined, 15_000, `the follower reaching event ${ids.at(-1)}`);
    expect(followed()).toEqual(ids);
    for (const d of daemons) expect(d.lines.join('\n')).not.toMatch(/STORE_|INTERNAL|error/i);
  });

  it('without wakeups=poll: STORE_UNAVAILABLE saying to add it, not a raw "prepared statement" error', async () => {
    const database = await ownDatabase('unpolled');
    const bouncer = await pathSetting(database, 1);
    const tm = createTaskManager({ store: createPgStore({ url: bouncer.url('tl', `schema=${SCHEMA}`) }) });
    onTestFinished(() => tm.close());
    // Clients of one store prepare the same statements; the pooler hands them one server session.
    const reads = await Promise.allSettled(Array.from({ length: 8 }, () => tm.findTasks({})));
    const refused = reads.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown);
    expect(refused.length).toBeGreaterThan(0);
    for (const e of refused) {
      expect(isEngineError(e) && e.code, String(e)).toBe('STORE_UNAVAILABLE');
      expect((e as Error).message).toMatch(/prepared statement .*pooler in transaction mode.*add wakeups=poll to the URL/);
    }
    const cli = await spawnCli(['--db', bouncer.url('tl', `schema=${SCHEMA}`), 'task', 'list']);
    if (cli.code !== 0) expect(cli.stderr).toMatch(/^taskloop: STORE_UNAVAILABLE: .*add wakeups=poll to the URL\)$/);
  });

  it('a pooler that drops the startup options without setting the path is refused at opening; one that refuses them is named', async () => {
    const database = await ownDatabase('optionless');
    const dropping = await startBouncer(inject('pgUrl'), { ignoreOptions: true, poolSize: 2, databases: { tl: { dbname: database } } });
    const dropped = await spawnCli(['--db', dropping.url('tl', 'wakeups=poll'), 'task', 'create', '--title', 'nowhere']);
    expect(dropped.code).toBe(1);
    expect(dropped.stderr).toMatch(/^taskloop: STORE_UNAVAILABLE: open on .*: the server gave this connection the search path .*not 'taskloop'.*nothing was written$/);
    const own = new URL(inject('pgUrl'));
    own.pathname = `/${database}`;
    const [tables] = await admin(own.toString(), "SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 'tasks'");
    expect(tables!.n).toBe(0);

    const refusing = await startBouncer(inject('pgUrl'), { ignoreOptions: false, poolSize: 2, databases: { tl: { dbname: database } } });
    const refused = await spawnCli(['--db', refusing.url('tl', 'wakeups=poll'), 'task', 'list']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^taskloop: STORE_UNAVAILABLE: .*unsupported startup parameter: options \(a pooler in between refuses the startup options/);
    expect(refused.stderr.split('\n')).toHaveLength(1);
  });
});
