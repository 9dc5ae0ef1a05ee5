/**
 * The daemons registry on PostgreSQL (postgres/daemons.ts): heartbeats that renew the busy
 * slots' leases in one statement, reclaims of a dead daemon's tasks, and reclaimSilent, the
 * reclaim of a daemon on another machine by its silence, on both stores. Then the daemon's
 * housekeeping: retention (postgres/retention.ts) and the monitor's figures (postgres/run-stats.ts).
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import { type TaskEvent, type TaskManager, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { pgDaemons } from '../../src/engine/postgres/daemons.js';
import { pgRetention } from '../../src/engine/postgres/retention.js';
import { TALLY_QUERY, createPgRunStats } from '../../src/engine/postgres/run-stats.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { prepareDaemons } from '../../src/engine/sqlite/daemons.js';
import { prepareMoves } from '../../src/engine/sqlite/moves.js';
import { createEventWriter } from '../../src/engine/sqlite/rows.js';
import { agent, codeOf, fakeClock, freshManager, operator, system, tempDir } from '../helpers.js';
import { openTaskStore } from '../stores.js';

const pgOf = (tm: TaskManager) => tm.store as PgTaskStore;

/** A task claimed (started) by `workerId`; its id and claim token. */
async function held(tm: TaskManager, workerId: string, leaseMs = 10_000): Promise<{ id: number; claimToken: string }> {
  const { task } = await tm.createTask({ title: `held by ${workerId}`, forAgent: 'w' }, operator);
  const claim = (await tm.claimTask({ agent: 'w', taskId: task.id, workerId, leaseMs, start: true }))!;
  return { id: claim.id, claimToken: claim.claimToken };
}

async function taskRow(tm: TaskManager, id: number) {
  const [row] = await pgOf(tm).conn.query<{ state: string; worker_id: string | null; lease_expires_at: number | null; stale_since: number | null }>(
    'SELECT state, worker_id, lease_expires_at, stale_since FROM tasks WHERE id = $1',
    [id],
  );
  return row!;
}

const register = (tm: TaskManager, id: string, host = 'h1', pid = 4242) =>
  pgOf(tm).write('register', (q, now) => pgDaemons.register(q, { id, host, pid, agent: 'w', threads: 2 }, now));
const list = (tm: TaskManager) => pgDaemons.list(pgOf(tm).conn.query);
const countOf = async (tm: TaskManager, sql: string, params: unknown[]) => (await pgOf(tm).conn.query<{ n: number }>(sql, params))[0]!.n;

/** Two more stores on the database (two processes' views), closed when the test finishes. */
function twoStores(url: string, now: () => number): [PgTaskStore, PgTaskStore] {
  const stores = [openTaskStore(url, { now }), openTaskStore(url, { now })] as [PgTaskStore, PgTaskStore];
  onTestFinished(async () => {
    await Promise.all(stores.map((s) => s.close()));
  });
  return stores;
}

const eventCount = async (tm: TaskManager) => (await pgOf(tm).conn.query<{ n: number }>('SELECT count(*)::int AS n FROM task_events'))[0]!.n;

describe('the daemons registry on PostgreSQL', () => {
  it('registers (again: afresh), lists, and unregisters daemons', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await register(tm, 'h1-1-aa');
    clock.advance(500);
    await register(tm, 'h1-2-bb', 'h1', 7);
    expect(await list(tm)).toEqual([
      { id: 'h1-1-aa', host: 'h1', pid: 4242, agent: 'w', threads: 2, startedAt: clock.now() - 500, heartbeatAt: clock.now() - 500 },
      { id: 'h1-2-bb', host: 'h1', pid: 7, agent: 'w', threads: 2, startedAt: clock.now(), heartbeatAt: clock.now() },
    ]);
    clock.advance(500);
    await register(tm, 'h1-1-aa', 'h2', 9);
    expect((await list(tm))[0]).toEqual({ id: 'h1-1-aa', host: 'h2', pid: 9, agent: 'w', threads: 2, startedAt: clock.now(), heartbeatAt: clock.now() });
    await pgOf(tm).write('unregister', (q) => pgDaemons.unregister(q, 'h1-1-aa'));
    expect((await list(tm)).map((d) => d.id)).toEqual(['h1-2-bb']);
  });

  it('a heartbeat renews the daemon and the leases its busy slots hold, from the database’s now, and no other lease', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await register(tm, 'd');
    const busy = [await held(tm, 'd/0', 1000), await held(tm, 'd/1', 5000)];
    const idle = await held(tm, 'd/2', 1000);
    const other = await held(tm, 'e/0', 1000);
    clock.advance(1500);
    await tm.sweep({ graceMs: 60_000 }); // marks the expired leases stale, reclaims nothing yet
    expect((await taskRow(tm, busy[0]!.id)).stale_since).toBe(clock.now());
    await pgOf(tm).write('beat', (q, now) => pgDaemons.heartbeat(q, 'd', ['d/0', 'd/1'], now));
    expect((await list(tm))[0]!.heartbeatAt).toBe(clock.now());
    expect(await taskRow(tm, busy[0]!.id)).toMatchObject({ state: 'in_progress', lease_expires_at: clock.now() + 1000, stale_since: null });
    expect((await taskRow(tm, busy[1]!.id)).lease_expires_at).toBe(clock.now() + 5000);
    for (const t of [idle, other]) expect(await taskRow(tm, t.id)).toMatchObject({ lease_expires_at: clock.now() - 500, stale_since: clock.now() });
    // A beat with no busy slot still writes the daemon's row.
    clock.advance(10);
    await pgOf(tm).write('beat', (q, now) => pgDaemons.heartbeat(q, 'd', [], now));
    expect((await list(tm))[0]!.heartbeatAt).toBe(clock.now());
  });

  it('reclaimDead returns the tasks of a dead daemon on this host at once; its old claim is refused STALE_CLAIM and writes nothing', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await register(tm, 'dead', 'h1', 111);
    await register(tm, 'alive', 'h1', 222);
    await register(tm, 'elsewhere', 'h2', 111); // a pid means nothing on another host
    await register(tm, 'self', 'h1', 111);
    const lost = [await held(tm, 'dead/0'), await held(tm, 'dead/1')];
    const kept = [await held(tm, 'alive/0'), await held(tm, 'elsewhere/0'), await held(tm, 'self/0'), await held(tm, 'dead0/0')];
    const { value, events } = await pgOf(tm).write('reclaim', (q, now, ev) => pgDaemons.reclaimDead(q, 'h1', 'self', (pid) => pid !== 111, now, ev));
    expect(value).toEqual(lost.map((t) => t.id));
    expect(events.map((e) => [e.taskId, e.type, e.data.reason])).toEqual(lost.map((t) => [t.id, 'task.stale_reclaimed', 'daemon dead (pid 111) is gone']));
    for (const t of lost) expect(await taskRow(tm, t.id)).toMatchObject({ state: 'pending', worker_id: null });
    for (const t of kept) expect((await taskRow(tm, t.id)).state).toBe('in_progress');
    expect((await list(tm)).map((d) => d.id)).toEqual(['alive', 'elsewhere', 'self']);

    const before = await eventCount(tm);
    const stale = tm.transitionTask({ taskId: lost[0]!.id, to: 'review', actor: agent('w'), claimToken: lost[0]!.claimToken });
    expect(await codeOf(stale)).toBe('STALE_CLAIM');
    expect(await eventCount(tm)).toBe(before);
    expect((await taskRow(tm, lost[0]!.id)).state).toBe('pending');
  });

  it('expireSlot lets one slot’s lease run out now, and the sweep returns its task', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const gone = await held(tm, 'd/0');
    const kept = await held(tm, 'd/1');
    await pgOf(tm).write('expire', (q, now) => pgDaemons.expireSlot(q, 'd/0', now));
    expect((await taskRow(tm, gone.id)).lease_expires_at).toBe(clock.now() - 1);
    expect((await tm.sweep({ graceMs: 0 })).requeued).toEqual([gone.id]);
    expect((await taskRow(tm, kept.id)).state).toBe('in_progress');
  });
});

describe('reclaimSilent: a daemon on another machine is known gone by its silence', () => {
  it('PostgreSQL: reclaims the slots of every silent daemon but itself, by exact id, and forgets those daemons', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    // `_` in an id is a LIKE wildcard: host_1's slots must not take hostX1's.
    for (const id of ['host_1-5', 'd1', 'self']) await register(tm, id, 'other');
    clock.advance(20_000);
    for (const id of ['hostX1-5', 'd10']) await register(tm, id, 'other');
    const lost = [await held(tm, 'host_1-5/0'), await held(tm, 'd1/3'), await held(tm, 'd1/4')];
    const kept = [await held(tm, 'hostX1-5/0'), await held(tm, 'd10/0'), await held(tm, 'self/0')];
    clock.advance(1000);
    const { value, events } = await pgOf(tm).write('reclaim', (q, now, ev) => pgDaemons.reclaimSilent(q, 'self', 15_000, now, ev));
    expect(value.sort((a, b) => a - b)).toEqual(lost.map((t) => t.id));
    expect(events.find((e) => e.taskId === lost[0]!.id)!.data).toMatchObject({ reason: 'daemon host_1-5 on other (pid 4242) sent no heartbeat for 21000 ms' });
    for (const t of lost) expect((await taskRow(tm, t.id)).state).toBe('pending');
    for (const t of kept) expect((await taskRow(tm, t.id)).state).toBe('in_progress');
    expect((await list(tm)).map((d) => d.id)).toEqual(['d10', 'hostX1-5', 'self']);
    expect(await codeOf(tm.transitionTask({ taskId: lost[1]!.id, to: 'review', actor: agent('w'), claimToken: lost[1]!.claimToken }))).toBe('STALE_CLAIM');
  });

  it('PostgreSQL: two stores reclaiming the same silent daemons at once reclaim each task exactly once', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    for (const id of ['a', 'b', 'c']) await register(tm, id);
    const tasks: number[] = [];
    for (const id of ['a', 'b', 'c']) for (let n = 0; n < 4; n++) tasks.push((await held(tm, `${id}/${n}`)).id);
    clock.advance(60_000);
    const [first, second] = twoStores(tm.path, clock.now);
    // The first holds its reclaim open until the second has run: the second must pass the
    // rows the first holds (SKIP LOCKED), not wait for them (it would wait forever here).
    let secondDone!: () => void;
    const done = new Promise<void>((r) => (secondDone = r));
    let firstReclaimed!: () => void;
    const reclaimedFirst = new Promise<void>((r) => (firstReclaimed = r));
    const one = first.write('reclaim', async (q, now, ev) => {
      const ids = await pgDaemons.reclaimSilent(q, 'self', 30_000, now, ev);
      firstReclaimed();
      await done;
      return ids;
    });
    await reclaimedFirst;
    const two = await second.write('reclaim', (q, now, ev) => pgDaemons.reclaimSilent(q, 'self', 30_000, now, ev));
    secondDone();
    expect((await one).value.sort((x, y) => x - y)).toEqual(tasks);
    expect(two).toEqual({ value: [], events: [] });
    // Raced freely too: together they reclaim nothing twice (nothing is left to reclaim).
    const again = await Promise.all([first, second].map((s) => s.write('reclaim', (q, now, ev) => pgDaemons.reclaimSilent(q, 'self', 30_000, now, ev))));
    expect(again.flatMap((o) => o.value)).toEqual([]);
    expect(await countOf(tm, "SELECT count(*)::int AS n FROM task_events WHERE type = 'task.stale_reclaimed'", [])).toBe(tasks.length);
    expect(await list(tm)).toEqual([]);
  });

  it('SQLite: the same reclaim, synchronous inside the store’s write', async () => {
    const clock = fakeClock();
    const store = createSqliteStore({ path: `${tempDir()}/tasks.db`, now: clock.now });
    const tm = createTaskManager({ store });
    onTestFinished(() => tm.close());
    const daemons = prepareDaemons(store.db, prepareMoves(store.db, createEventWriter(store.db)));
    const write = <T>(fn: (events: TaskEvent[], now: number) => T) => store.write('daemons', fn);
    for (const id of ['host_1-5', 'd1', 'self']) await write((_ev, now) => daemons.register({ id, host: 'other', pid: 4242, agent: 'w', threads: 2 }, now));
    clock.advance(20_000);
    for (const id of ['hostX1-5', 'd10']) await write((_ev, now) => daemons.register({ id, host: 'other', pid: 4242, agent: 'w', threads: 2 }, now));
    const lost = [await held(tm, 'host_1-5/0'), await held(tm, 'd1/3'), await held(tm, 'd1/4')];
    const kept = [await held(tm, 'hostX1-5/0'), await held(tm, 'd10/0'), await held(tm, 'self/0')];
    clock.advance(1000);
    const { value, events } = await write((ev, now) => daemons.reclaimSilent('self', 15_000, now, ev));
    expect(value.sort((a, b) => a - b)).toEqual(lost.map((t) => t.id));
    expect(events.find((e) => e.taskId === lost[0]!.id)!.data).toMatchObject({ reason: 'daemon host_1-5 on other (pid 4242) sent no heartbeat for 21000 ms' });
    for (const t of lost) expect((await tm.getTask(t.id)).state).toBe('pending');
    for (const t of kept) expect((await tm.getTask(t.id)).state).toBe('in_progress');
    expect(daemons.list().map((d) => d.id)).toEqual(['d10', 'hostX1-5', 'self']);
    expect(await codeOf(tm.transitionTask({ taskId: lost[1]!.id, to: 'review', actor: agent('w'), claimToken: lost[1]!.claimToken }))).toBe('STALE_CLAIM');
  });
});

/** A finished task with a run, two steps and a screen, written as the run store would. */
async function finishedWithRun(tm: TaskManager, title: string): Promise<{ id: number; runId: number }> {
  const { task } = await tm.createTask({ title }, operator);
  const claim = (await tm.claimTask({ agent: 'w', taskId: task.id, start: true }))!;
  const q = pgOf(tm).conn.query;
  const [run] = await q<{ id: number }>(
    `INSERT INTO runs (task_id, phase, budget, usage, started_at, finished_at, envelope) VALUES ($1, 'completed', '{}', '{}', 0, 0, '{"phase":"completed"}') RETURNING id`,
    [claim.id],
  );
  await q(`INSERT INTO steps (run_id, seq, kind, status, duration_ms, started_at) VALUES ($1, 1, 'tool', 'done', 5, 0), ($1, 2, 'plan', 'done', 7, 0)`, [run!.id]);
  await q(`INSERT INTO run_screens (run_id, seq, png, taken_at) VALUES ($1, 1, '\\x89'::bytea, 0)`, [run!.id]);
  await tm.transitionTask({ taskId: claim.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken });
  await tm.transitionTask({ taskId: claim.id, to: 'completed', actor: system });
  return { id: claim.id, runId: run!.id };
}

describe('retention on PostgreSQL', () => {
  it('compacts the steps, screens and events of tasks finished before the cutoff, keeping tasks and runs, and logs the pass first', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const old = await finishedWithRun(tm, 'old');
    const { task: waiting } = await tm.createTask({ title: 'old but pending' }, operator);
    clock.advance(1000);
    const cutoff = clock.now();
    const recent = await finishedWithRun(tm, 'recent');
    const cursor = (await tm.stats()).lastEventId;

    const { value, events } = await pgOf(tm).write('compact', (q, now, ev) => pgRetention.compact(q, cutoff, now, ev));
    expect(value).toBe(1);
    expect(events).toMatchObject([{ taskId: null, type: 'retention.compacted', actor: 'retention', actorRole: 'system', data: { tasks: 1, finished_before: new Date(cutoff).toISOString() } }]);
    expect(events[0]!.id).toBe(cursor + 1);
    expect(await tm.getTask(old.id)).toMatchObject({ state: 'completed', events: [] });
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM steps WHERE run_id = $1', [old.runId])).toBe(0);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM run_screens WHERE run_id = $1', [old.runId])).toBe(0);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM runs WHERE id = $1 AND envelope IS NOT NULL', [old.runId])).toBe(1);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM tasks WHERE id = $1 AND last_event_id IS NULL', [old.id])).toBe(1);
    expect((await tm.getTask(waiting.id)).events).toHaveLength(1);
    expect((await tm.getTask(recent.id)).events.length).toBeGreaterThan(2);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM steps WHERE run_id = $1', [recent.runId])).toBe(2);

    // Nothing left before the cutoff: no pass, no event.
    const again = await pgOf(tm).write('compact', (q, now, ev) => pgRetention.compact(q, cutoff, now, ev));
    expect(again).toEqual({ value: 0, events: [] });
  });

  it('two stores compacting at once compact each task once', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await finishedWithRun(tm, `t${i}`)).id);
    clock.advance(1000);
    const [first, second] = twoStores(tm.path, clock.now);
    const compact = (s: PgTaskStore) => s.write('compact', (q, now, ev) => pgRetention.compact(q, clock.now(), now, ev));
    const outcomes = await Promise.all([compact(first), compact(second)]);
    expect(outcomes.reduce((n, o) => n + o.value, 0)).toBe(6);
    // One retention.compacted per pass that compacted anything.
    expect(outcomes.flatMap((o) => o.events)).toHaveLength(outcomes.filter((o) => o.value > 0).length);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM task_events WHERE task_id IS NOT NULL', [])).toBe(0);
    expect(await countOf(tm, 'SELECT count(*)::int AS n FROM steps', [])).toBe(0);
    expect((await Promise.all([compact(first), compact(second)])).map((o) => o.value)).toEqual([0, 0]);
  });
});

describe('run stats on PostgreSQL', () => {
  async function complete(tm: TaskManager, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      await tm.createTask({ title: `t${i}` }, operator);
      const claim = (await tm.claimTask({ agent: 'w', start: true }))!;
      await tm.transitionTask({ taskId: claim.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken });
      await tm.transitionTask({ taskId: claim.id, to: 'completed', actor: system });
    }
  }

  it('counts completions and reclaims in the window as it slides, runs by phase, and step durations', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const runStats = createPgRunStats(pgOf(tm).conn.query);
    const stats = (since: number, now: number) => pgOf(tm).read(() => runStats(since, now));
    const t0 = clock.now();
    const window = async () => {
      const s = await stats(clock.now() - 60_000, clock.now());
      return { completed: s.completed, reclaims: s.staleReclaims };
    };
    expect(await stats(t0 - 60_000, t0)).toEqual({ runsByPhase: {}, stepDurations: {}, staleReclaims: 0, completed: 0, windowMs: 60_000 });

    await complete(tm, 3);
    clock.advance(30_000);
    await complete(tm, 2);
    await tm.createTask({ title: 'stale' }, operator);
    await tm.claimTask({ agent: 'w', leaseMs: 1000, start: true });
    clock.advance(1001);
    await tm.sweep({ graceMs: 0 });
    expect(await window()).toEqual({ completed: 5, reclaims: 1 });
    clock.set(t0 + 75_000);
    expect(await window()).toEqual({ completed: 2, reclaims: 1 });
    await complete(tm, 4);
    expect(await window()).toEqual({ completed: 6, reclaims: 1 });
    expect((await stats(t0 - 1000, clock.now())).completed).toBe(9);
    clock.set(t0 + 500_000);
    expect(await window()).toEqual({ completed: 0, reclaims: 0 });

    const q = pgOf(tm).conn.query;
    const [task] = await q<{ id: number }>('SELECT id FROM tasks ORDER BY id LIMIT 1');
    const runs = await q<{ id: number }>(
      `INSERT INTO runs (task_id, phase, budget, usage, started_at, finished_at) VALUES
         ($1, 'completed', '{}', '{}', 0, $2), ($1, 'completed', '{}', '{}', 0, $2), ($1, 'failed', '{}', '{}', 0, $2), ($1, 'failed', '{}', '{}', 0, $3)
       RETURNING id`,
      [task!.id, clock.now(), clock.now() - 120_000],
    );
    for (let i = 1; i <= 100; i++) {
      await q(`INSERT INTO steps (run_id, seq, kind, status, duration_ms, started_at) VALUES ($1, $2, $3, 'done', $4, 0)`, [runs[0]!.id, i, i % 2 ? 'tool' : 'plan', i]);
    }
    await q(`INSERT INTO steps (run_id, seq, kind, status, started_at) VALUES ($1, 101, 'tool', 'running', 0)`, [runs[0]!.id]);
    const s = await stats(clock.now() - 60_000, clock.now());
    expect(s.runsByPhase).toEqual({ completed: 2, failed: 1 });
    expect(s.stepDurations).toEqual({ tool: { p50: 51, p99: 99, count: 50 }, plan: { p50: 52, p99: 100, count: 50 } });
  });

  it('the window’s counts come from the partial index, not a scan of the log', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'migrate' }, operator);
    const { value: plan } = await pgOf(tm).write('explain', async (q) => {
      await q('SET LOCAL enable_seqscan = off'); // the table is tiny: ask whether the index can serve the query at all
      return q<{ 'QUERY PLAN': string }>(`EXPLAIN ${TALLY_QUERY}`, [0]);
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain('task_events_tally');
  });
});
