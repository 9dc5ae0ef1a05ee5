/**
 * Round trips on PostgreSQL, counted (pg.Client#query calls in this process; node-postgres
 * sends one query at a time, so one call is one round trip). A move locks its task with
 * BEGIN and writes its row, its dependents and its events in one statement; a create and a
 * claim of the next task are one statement each, outside any transaction. The counts are the contract BENCHMARKS.md states; a change that
 * adds a round trip to the hot path fails here rather than in a benchmark.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Budget, TransitionInput } from '../../src/engine/index.js';
import { wakeBucket } from '../../src/engine/claims.js';
import { claimTask } from '../../src/engine/postgres/claim.js';
import { literal } from '../../src/engine/postgres/connection.js';
import { lockOpening } from '../../src/engine/postgres/moves.js';
import { createPgRunStore } from '../../src/engine/postgres/run-store.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { ROOT, codeOf, freshManager, operator, system, tempDir, waitFor } from '../helpers.js';
import { execSql } from '../stores.js';

/**
 * The statements `fn` sent, in order. A call made while the same client still waits for an
 * answer rode in the same round trip (the pool pipelines): it is marked `pipelined: `. Only
 * the connections that sent a statement matching `mine` (by default, those that opened a
 * transaction) count when any did: a store's background poll (every 50 ms with
 * wakeups=poll), or the watcher's look after a wake-up, may run on another connection
 * meanwhile, and is not `fn`'s.
 */
async function statementsOf(fn: () => Promise<unknown>, mine = /(^|; )BEGIN(;|$)/): Promise<string[]> {
  const calls: Array<{ client: object; text: string }> = [];
  const waiting = new WeakMap<object, number>();
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, text: unknown, ...rest: unknown[]) {
    const named = typeof text === 'object' && text !== null && typeof (text as { name?: unknown }).name === 'string';
    const inFlight = waiting.get(this) ?? 0;
    calls.push({ client: this, text: `${inFlight > 0 ? 'pipelined: ' : ''}${named ? 'named: ' : ''}${typeof text === 'string' ? text : String((text as { text?: string })?.text)}` });
    const result = (original as (...a: unknown[]) => unknown).call(this, text, ...rest);
    if (result instanceof Promise) {
      waiting.set(this, inFlight + 1);
      const done = () => waiting.set(this, (waiting.get(this) ?? 1) - 1);
      result.then(done, done);
    }
    return result;
  } as typeof original;
  try {
    await fn();
  } finally {
    pg.Client.prototype.query = original;
  }
  const opened = new Set(calls.filter((c) => mine.test(c.text)).map((c) => c.client));
  return calls.filter((c) => opened.size === 0 || opened.has(c.client)).map((c) => c.text);
}

/** Round trips: the statements that waited for the answer before them. */
const tripsOf = (statements: string[]) => statements.filter((s) => !s.startsWith('pipelined: '));

/**
 * The wake-ups for claimers that `fn`'s commits sent, heard by a real LISTEN: how many, and on
 * which channels (`every` queue's, the default queue's bucket's, that of claimers of `any`).
 */
async function wakeupsOf(tm: ReturnType<typeof freshManager>): Promise<(fn: () => Promise<unknown>) => Promise<string[]>> {
  const conn = (tm.store as PgTaskStore).conn;
  const listener = await conn.dedicated();
  await listener.connect();
  onTestFinished(() => listener.end());
  const names = new Map([
    [conn.channel, 'every'],
    [`${conn.channel}$w${wakeBucket('default')}`, 'default'],
    [`${conn.channel}$wany`, 'any'],
  ]);
  const heard: Array<{ channel: string; payload: string }> = [];
  listener.on('notification', (n) => heard.push({ channel: n.channel, payload: n.payload ?? '' }));
  await listener.query([...names.keys()].map((c) => `LISTEN ${c}`).join('; '));
  return async (fn) => {
    heard.length = 0;
    await fn();
    // Notifications arrive in commit order: once this one is heard, every earlier one was.
    await listener.query(`NOTIFY ${conn.channel}, 'sentinel'`);
    await waitFor(() => heard.some((h) => h.payload === 'sentinel'), 5000);
    return heard.filter((h) => h.payload !== 'sentinel').map((h) => names.get(h.channel)!);
  };
}

const agent = { id: 'agent-1', role: 'agent' } as const;
const BUDGET: Budget = { maxSteps: 20, maxFailures: 3, maxWriteCalls: null, maxPending: null, deadlineAt: null, maxTokens: 1000, maxCost: null };

describe('round trips on PostgreSQL', () => {
  it('a create, a claim of the next task and a move by the store that claimed it are 1 round trip each; a claim of a named task and a move another store makes 2 (lock with BEGIN; one statement for row, dependents and events, pipelined with the COMMIT)', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { task: first } = await tm.createTask({ title: 'first' }, operator);
    const { task: after } = await tm.createTask({ title: 'after', dependsOn: [first.id] }, operator);

    const claimed = await tm.claimTask({ agent: agent.id, start: true });
    // A create without a key or dependencies: one statement, outside any transaction, writes
    // its row and its event in the database's clock and wakes the claimers (2 round trips before).
    const create = await statementsOf(() => tm.createTask({ title: 'second' }, operator), /INSERT INTO tasks/);
    expect(create).toEqual([expect.stringMatching(/^named: WITH c AS \(SELECT coalesce\(\$14::bigint, .*clock_timestamp.*INSERT INTO tasks .*INSERT INTO task_events .*pg_notify/s)]);
    // A claim of whatever is next: one statement, outside any transaction, picks, claims and
    // writes its events on one reading of the database's clock (2 round trips before).
    const claim = await statementsOf(() => tm.claimTask({ agent: agent.id, start: true }));
    expect(claim).toEqual([expect.stringMatching(/^named: WITH c AS \(SELECT coalesce\(\$4::bigint, .*clock_timestamp.*FOR UPDATE SKIP LOCKED.*UPDATE tasks t SET .*INSERT INTO task_events/s)]);
    // A claim of a named task still locks it with BEGIN and writes with the COMMIT.
    const { task: named } = await tm.createTask({ title: 'named' }, operator);
    let namedClaim!: { claimToken: string };
    const byId = await statementsOf(async () => void (namedClaim = (await tm.claimTask({ agent: agent.id, taskId: named.id }))!));
    expect(tripsOf(byId)).toHaveLength(2);
    expect(byId[0]).toMatch(/BEGIN; EXECUTE taskloop_now; EXECUTE taskloop_lock_row\(\d+::bigint\)$/);
    expect(byId[1]).toMatch(/^named: WITH w0 AS \(UPDATE tasks SET state = \$1, .*INSERT INTO task_events/s);
    expect(byId[2]).toBe('pipelined: COMMIT');

    // A move by the store whose claim took the task (move-one.ts): BEGIN, the row's lock, one
    // statement for the row (if it is still as claimed), its dependents and its events, and the
    // COMMIT, written at once.
    const move = await statementsOf(() =>
      tm.transitionTask({ taskId: claimed!.id, to: 'review', actor: agent, claimToken: claimed!.claimToken, then: [{ to: 'completed', actor: system }] }),
    );
    expect(tripsOf(move)).toHaveLength(1);
    expect(move).toEqual([
      'BEGIN',
      'pipelined: named: SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE',
      expect.stringMatching(/^pipelined: named: WITH c AS .*UPDATE tasks t SET .*INSERT INTO task_events .*UPDATE tasks SET unmet_deps = unmet_deps - 1\s.*pg_catalog\.pg_notify/s),
      'pipelined: COMMIT',
    ]);
    // A move by a store that did not claim the task: it reads the row first (2 round trips).
    const other = freshManager({ path: tm.path });
    onTestFinished(() => other.close());
    await (other.store as PgTaskStore).ready; // its migration check is not the move's
    const slow = await statementsOf(() => other.transitionTask({ taskId: named.id, to: 'pending', actor: agent, claimToken: namedClaim.claimToken }));
    expect(tripsOf(slow)).toHaveLength(2);
    expect(slow[0]).toMatch(/BEGIN; EXECUTE taskloop_now; EXECUTE taskloop_lock_row\(\d+::bigint\)$/);
    expect(slow[1]).toMatch(/^named: WITH w0 AS \(UPDATE tasks SET state = \$1, .*INSERT INTO task_events/s);
    expect(slow[2]).toBe('pipelined: NOTIFY taskloop_' + (tm.store as PgTaskStore).conn.location.schema + '; COMMIT');

    // What the one statement wrote: the task, its dependent (now claimable), both events in order.
    const done = await tm.getTask(first.id);
    expect(done.state).toBe('completed');
    const types = done.events.map((e) => `${e.type}:${String(e.data.to)}`);
    expect(types.slice(-2)).toEqual(['task.transitioned:review', 'task.transitioned:completed']);
    expect(done.events.map((e) => e.id)).toEqual([...done.events.map((e) => e.id)].sort((a, b) => a - b));
    const next = await tm.claimTask({ agent: agent.id });
    expect(next?.id).toBe(after.id);
  });

  it("a cancel whose dependents hang in a chain and a fan (300 tasks) is a few round trips, not three a task: one statement finds and locks them all, one writes them, one looks again", async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { task: root } = await tm.createTask({ title: 'root' }, operator);
    // A chain of 200 under the root, and 100 more hanging on its links and the root.
    const chain = await tm.createTasks(
      Array.from({ length: 200 }, (_, i) => (i === 0 ? { title: 'link 0', dependsOn: [root.id], ref: 'l0' } : { title: `link ${i}`, dependsOnRefs: [`l${i - 1}`], ref: `l${i}` })),
      agent,
    );
    const ids = chain.map((c) => c.task.id);
    await tm.createTasks(Array.from({ length: 100 }, (_, i) => ({ title: `fan ${i}`, dependsOn: [ids[i * 2]!, root.id] })), agent);

    const cancel = await statementsOf(() => tm.cancelTask({ taskId: root.id, actor: operator, reason: 'not needed' }));
    expect(tripsOf(cancel).length).toBeLessThanOrEqual(11); // ~900 when each dependent was cancelled on its own
    // The walk, and once more from all it cancelled, which finds nothing (cascade-race.test.ts),
    // with sequential scans off around them (moves.ts DOOMED).
    expect(cancel.filter((s) => /WITH RECURSIVE doomed/.test(s))).toHaveLength(2);

    expect((await tm.stats()).byState).toMatchObject({ cancelled: 301, pending: 0 });
    // Each with its own event, naming the dependency it waited on (the root, where it did).
    const [first, last, fan] = [await tm.getTask(ids[0]!), await tm.getTask(ids[199]!), (await tm.findTasks({ states: ['cancelled'], limit: 500 })).find((t) => t.title === 'fan 7')!];
    expect(first.events.at(-1)).toMatchObject({ type: 'task.cancelled', actor: 'system', data: { from: 'pending', to: 'cancelled', reason: `dependency ${root.id} ended cancelled` } });
    expect(last.events.at(-1)).toMatchObject({ type: 'task.cancelled', data: { reason: `dependency ${ids[198]} ended cancelled` } });
    expect((await tm.getTask(fan.id)).events.at(-1)).toMatchObject({ type: 'task.cancelled', data: { reason: `dependency ${root.id} ended cancelled` } });
  });

  it('a sweep of 1,200 expired claims is transactions of at most 500 reclaims (three for the claimed, one that finds no task in progress), not one holding its locks for all', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    for (let i = 0; i < 1200; i += 600) await tm.createTasks(Array.from({ length: 600 }, (_, j) => ({ title: `t${i + j}` })), operator);
    for (let i = 0; i < 1200; i++) await tm.claimTask({ agent: 'hoarder', leaseMs: 100 });
    await new Promise((r) => setTimeout(r, 150));
    let requeued = 0;
    const sweep = await statementsOf(async () => void (requeued = (await tm.sweep({ graceMs: 0 })).requeued.length));
    expect(requeued).toBe(1200);
    expect(sweep.filter((s) => /(^|; )BEGIN(;|$)/.test(s))).toHaveLength(4);
    expect(sweep.filter((s) => /LIMIT 500 FOR UPDATE SKIP LOCKED/.test(s))).toHaveLength(4);
    // The leases seen expired are marked once, by the first.
    expect(sweep.filter((s) => /SET stale_since = /.test(s))).toHaveLength(1);
  });

  it('beginning a step is 5 round trips: its fence takes the task’s claim with BEGIN (then the run, the step, its event, the commit)', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const runs = createPgRunStore(tm.store as PgTaskStore);
    await tm.createTask({ title: 'run me', card: { goal: 'g' } }, operator);
    const task = await tm.claimTask({ agent: agent.id, start: true });
    const fence = { taskId: task!.id, agent: agent.id, claimToken: task!.claimToken };
    const { run } = await runs.openRun(fence, BUDGET);
    const begin = await statementsOf(() => runs.beginStep(fence, { runId: run.id, kind: 'action', tool: 'echo', args: {} }));
    expect(begin[0]).toMatch(/BEGIN; EXECUTE taskloop_now; EXECUTE taskloop_lock_claim\(\d+::bigint\)$/);
    expect(begin.length).toBeLessThanOrEqual(5);
    // The fence still refuses a stale claim, from the row the opening locked.
    expect(await codeOf(runs.beginStep({ ...fence, claimToken: 'not-the-token' }, { runId: run.id, kind: 'action', tool: 'echo', args: {} }))).toBe('STALE_CLAIM');
  });

  it('statements are prepared once per connection by name; behind a pooler in transaction mode (wakeups=poll) none is', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { task: one } = await tm.createTask({ title: 'one' }, operator);
    const named = await statementsOf(() => tm.claimTask({ agent: agent.id, taskId: one.id, start: true }));
    expect(named.filter((s) => s.includes('named: ')).length).toBe(1); // the write; the lock is EXECUTEd in the opening
    expect(named[0]).toMatch(/^(PREPARE .*; )?BEGIN; EXECUTE taskloop_now; EXECUTE taskloop_lock_row\(/s);

    const pooled = freshManager({ path: `${tm.path}&wakeups=poll` });
    onTestFinished(() => pooled.close());
    const { task } = await pooled.createTask({ title: 'two' }, operator);
    const claimed = (await pooled.claimTask({ agent: agent.id, taskId: task.id }))!;
    const move = await statementsOf(() => pooled.transitionTask({ taskId: claimed.id, to: 'pending', actor: agent, claimToken: claimed.claimToken }));
    expect(move.some((s) => s.startsWith('named: ') || /PREPARE|EXECUTE/.test(s))).toBe(false);
    expect(move[0]).toMatch(new RegExp(`^BEGIN; SELECT .*; SELECT \\* FROM tasks WHERE id = ${task.id}::bigint FOR UPDATE$`));
    expect(move.slice(1)).toEqual([expect.stringMatching(/^WITH w0 AS \(UPDATE tasks SET state = \$1/), expect.stringMatching(/^pipelined: NOTIFY taskloop_\w+; COMMIT$/)]);
    expect((await pooled.getTask(task.id)).state).toBe('pending');
  });

  it('a claimer’s names reach a pick only as hex (in a transaction’s opening, as a daemon’s claim of a run) or bound (a claim of the next task): quotes, backslashes, $$ and Unicode claim exactly their own task', async () => {
    expect(literal("x'); DROP TABLE tasks; --")).toBe(`(convert_from(decode('${Buffer.from("x'); DROP TABLE tasks; --").toString('hex')}', 'hex'), 'UTF8') COLLATE pg_catalog."default")`);
    expect(literal(7)).toBe('7');
    for (const bad of [1.5, Number.NaN, 2 ** 60, {} as unknown as string]) expect(() => literal(bad)).toThrow();
    const tm = freshManager();
    onTestFinished(() => tm.close());
    // The manager admits only plain names for a claimer; the store below it is driven directly
    // here, as a library caller past the schema could, with names no schema would admit.
    const store = tm.store as PgTaskStore;
    const names = ["o'brien", "x'); DROP TABLE tasks; --", 'back\\slash\\', '$$ dollar $q$', '名前 🚀', "E'\\x41'"];
    const ids = new Map<string, number>();
    for (const n of names) ids.set(n, (await store.createTasks([{ title: `for ${n}`, forAgent: n }], operator)).value[0]!.task.id);
    for (const [i, n] of [...names].reverse().entries()) {
      const asRun = i % 2 === 0;
      const statements = await statementsOf(async () => {
        // A pick in a transaction's opening, as a daemon's claim of a run takes it (run-store.ts).
        const inOpening = () => store.write('claim', (q, now, ev) => claimTask(q, { agent: n, start: true }, now, ev), { pick: { agent: n } });
        const got = (asRun ? await inOpening() : await store.claim({ agent: n, start: true })).value;
        expect(got?.id).toBe(ids.get(n));
      });
      if (asRun) {
        const hex = `\\(convert_from\\(decode\\('[0-9a-f]+', 'hex'\\), 'UTF8'\\) COLLATE pg_catalog."default"\\)::text`;
        expect(statements[0]).toMatch(new RegExp(`^(PREPARE .*; )?BEGIN; EXECUTE taskloop_pick\\(${hex}, ${hex}, `, 's'));
      } else {
        expect(statements).toEqual([expect.stringMatching(/^named: WITH c AS/)]);
        expect(statements[0]).not.toContain(n);
      }
    }
    expect((await store.claim({ agent: 'nobody' })).value).toBeNull();
    expect((await createPgRunStore(store).claimRun({ agent: 'nobody' }, () => BUDGET))).toBeNull();
    expect((await tm.stats()).byState.in_progress).toBe(names.length);
  });

  it('what an agent writes stays a bound value: never in the SQL text (nor the claim token), and back exactly as it went in, prepared and behind a pooler', async () => {
    const hostile = ["o'brien", "x'); DROP TABLE tasks; --", 'back\\slash\\', "\\'; SELECT 1; --", '$$ dollar $q$ $1', '名前 🚀', "E'\\x41'", '\\x41'];
    const base = freshManager();
    onTestFinished(() => base.close());
    const pooled = freshManager({ path: `${base.path}&wakeups=poll` });
    onTestFinished(() => pooled.close());
    for (const tm of [base, pooled]) {
      const store = tm.store as PgTaskStore;
      for (const name of hostile) {
        // Claimed by id (its move takes the full path), and as the next task (one round trip).
        for (const byId of [true, false]) {
          // The manager admits only an agent's name in for_agent; the store is driven directly.
          const { task } = (await store.createTasks([{ title: `for ${name}`, forAgent: name }], operator)).value[0]!;
          const claimed = (await store.claim({ agent: name, ...(byId ? { taskId: task.id } : {}), start: true })).value!;
          expect(claimed.id).toBe(task.id);
          const reason = `${name} reason`;
          const sent = await statementsOf(() =>
            store.transition({ taskId: task.id, to: 'review', actor: { id: name, role: 'agent' }, claimToken: claimed.claimToken, reason }),
          );
          expect(tripsOf(sent)).toHaveLength(byId ? 2 : 1);
          for (const text of sent) for (const secret of [reason, claimed.claimToken]) expect(text).not.toContain(secret);
          const back = await tm.getTask(task.id);
          expect(back.assignee).toBe(name);
          const moved = back.events.at(-1)!;
          expect([moved.actor, moved.data.reason, moved.data.to]).toEqual([name, reason, 'review']);
        }
      }
    }
    expect((await base.stats()).byState.review).toBe(4 * hostile.length);
    const [row] = await (base.store as PgTaskStore).conn.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks');
    expect(row!.n).toBe(4 * hostile.length);
  });

  it('a schema name of 45 characters carries its wake-ups and controls whole; a longer one is refused before connecting', async () => {
    const base = freshManager();
    onTestFinished(() => base.close());
    const schema = `l${randomBytes(22).toString('hex')}`; // 45 characters
    const url = base.path.replace(/schema=\w+/, `schema=${schema}`);
    onTestFinished(() => execSql(base, `DROP SCHEMA IF EXISTS ${schema} CASCADE`));
    const tm = freshManager({ path: url });
    const wakeups = await wakeupsOf(tm);
    let first!: { id: number };
    // Its longest channel (`…$wany`) has 59 characters: pg_notify would refuse one over 63.
    expect(await wakeups(async () => void ({ task: first } = await tm.createTask({ title: 'first' }, operator)))).toEqual(['default', 'any']);
    expect(await wakeups(() => tm.createTask({ title: 'after', dependsOn: [first.id] }, operator))).toEqual(['default', 'any']);
    const c = (await tm.claimTask({ agent: agent.id, taskId: first.id, start: true }))!;
    const done = () => tm.transitionTask({ taskId: c.id, to: 'review', actor: agent, claimToken: c.claimToken, then: [{ to: 'completed', actor: system }] });
    expect(await wakeups(done)).toEqual(['every']);
    expect((await tm.claimTask({ agent: agent.id }))?.title).toBe('after');
    expect(() => freshManager({ path: url.replace(`schema=${schema}`, `schema=${schema}x`) })).toThrow(/schema .* 1 to 45/);
  });

  it('a hostile task id never reaches the SQL text: only a safe positive integer is written into the opening', async () => {
    expect(lockOpening(42, true)).toEqual({ name: 'taskloop_lock_row', sql: 'SELECT * FROM tasks WHERE id = $1 FOR UPDATE', types: ['bigint'], args: [42] });
    for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 60, '1; DROP TABLE tasks' as unknown as number, '7' as unknown as number]) {
      expect(lockOpening(bad, true)).toBeUndefined();
    }
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { task: victim } = await tm.createTask({ title: 'victim' }, operator);
    // Past the manager's schema (a library caller on the store itself): refused, nothing dropped.
    const store = tm.store as PgTaskStore;
    const input = { taskId: '1; DROP TABLE tasks' as unknown as number, to: 'cancelled', actor: operator } as TransitionInput;
    await expect(store.transition(input)).rejects.toThrow();
    expect((await tm.getTask(victim.id))?.state).toBe('pending');
  });
});

describe('NOTIFY on PostgreSQL: only commits that may make a task claimable send one', () => {
  it('a create notifies its queue’s claimers and those of any queue; a completion that frees a dependent and a release notify every claimer; a claim and a completion that frees nothing do not', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const wakeups = await wakeupsOf(tm);
    let first: { id: number } | undefined;
    expect(await wakeups(async () => void ({ task: first } = await tm.createTask({ title: 'first' }, operator)))).toEqual(['default', 'any']);
    const creates = async () => {
      await tm.createTask({ title: 'after', dependsOn: [first!.id] }, operator);
      await tm.createTask({ title: 'alone' }, operator);
    };
    expect(await wakeups(creates)).toEqual(['default', 'any', 'default', 'any']);
    // A create in another queue notifies another bucket's channel (not heard here) and `any`.
    expect(wakeBucket('mail')).not.toBe(wakeBucket('default'));
    expect(await wakeups(() => tm.createTask({ title: 'a letter', queue: 'mail' }, operator))).toEqual(['any']);
    const claimed: Array<{ id: number; claimToken: string }> = [];
    expect(await wakeups(async () => void claimed.push((await tm.claimTask({ agent: agent.id, start: true }))!))).toEqual([]);
    expect(await wakeups(async () => void claimed.push((await tm.claimTask({ agent: agent.id, start: true }))!))).toEqual([]);
    const [freeing, lonely] = claimed[0]!.id === first!.id ? [claimed[0]!, claimed[1]!] : [claimed[1]!, claimed[0]!];
    const complete = (t: { id: number; claimToken: string }) => () =>
      tm.transitionTask({ taskId: t.id, to: 'review', actor: agent, claimToken: t.claimToken, then: [{ to: 'completed', actor: system }] });
    expect(await wakeups(complete(lonely))).toEqual([]);
    // The statement that frees the dependent calls pg_notify itself, in the commit's round trip.
    expect(await wakeups(complete(freeing))).toEqual(['every']);
    expect((await tm.claimTask({ agent: agent.id }))?.title).toBe('after');
    // A release back to pending notifies too (its claimer gave it up: someone else may take it).
    // (Every notifying commit is made inside `wakeups`: a NOTIFY heard late would count in the next.)
    let third!: { id: number };
    expect(await wakeups(async () => void ({ task: third } = await tm.createTask({ title: 'third' }, operator)))).toEqual(['default', 'any']);
    const c = (await tm.claimTask({ agent: agent.id, taskId: third.id }))!;
    expect(await wakeups(() => tm.transitionTask({ taskId: c.id, to: 'pending', actor: agent, claimToken: c.claimToken }))).toEqual(['every']);
  });

  it('a follower of every commit still sees a claim made on another connection (the follow poll), a claimer is woken by a create', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const other = freshManager({ path: tm.path });
    onTestFinished(() => other.close());
    await tm.createTask({ title: 'to claim' }, operator);
    let all = 0;
    let work = 0;
    const offAll = tm.store.watch(() => all++);
    const offWork = tm.store.watch(() => work++, 'work');
    onTestFinished(() => {
      offAll();
      offWork();
    });
    await new Promise((r) => setTimeout(r, 300));
    const [all0, work0] = [all, work];
    expect(await other.claimTask({ agent: agent.id })).not.toBeNull();
    await waitFor(() => all > all0, 3000);
    await other.createTask({ title: 'new work' }, operator);
    await waitFor(() => work > work0, 3000);
  });
});

describe('prepared statements and a schema that changes under them', () => {
  it('a column added by a newer taskloop while this one runs: claims, moves and reads go on (the connection is replaced)', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    for (let i = 0; i < 4; i++) await tm.createTask({ title: `t${i}` }, operator);
    // Every statement of the hot path prepared on the pool's connections.
    const first = (await tm.claimTask({ agent: agent.id, start: true }))!;
    await tm.transitionTask({ taskId: first.id, to: 'review', actor: agent, claimToken: first.claimToken });
    await tm.findTasks({});
    await execSql(tm, 'ALTER TABLE tasks ADD COLUMN added_later integer');
    const next = (await tm.claimTask({ agent: agent.id, start: true }))!;
    expect(next).not.toBeNull();
    expect((await tm.transitionTask({ taskId: first.id, to: 'completed', actor: system })).state).toBe('completed');
    expect((await tm.findTasks({})).length).toBe(4);
  });
});

describe('the commit’s round trip when its write fails', () => {
  for (const how of ['by id', 'the next'] as const) {
    it(`a held write that fails with its COMMIT in flight rolls back whole and leaves its connection clean; a deadlock there is retried and writes once (a task claimed ${how}: ${how === 'by id' ? 'the full path' : 'one round trip'})`, async () => {
      const tm = freshManager();
      onTestFinished(() => tm.close());
      // A trigger on the event log: 'explode' fails the statement; 'deadlock' fails it as a
      // deadlock (40P01) the first time only (a sequence counts: it is not rolled back), as a
      // lost lock race would.
      await execSql(tm, 'CREATE SEQUENCE tripped');
      await execSql(
        tm,
        `CREATE FUNCTION trip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           IF NEW.data::jsonb->>'reason' = 'explode' THEN RAISE EXCEPTION 'exploded on purpose'; END IF;
           IF NEW.data::jsonb->>'reason' = 'deadlock' AND nextval('tripped') = 1 THEN
             RAISE EXCEPTION 'deadlock on purpose' USING ERRCODE = '40P01';
           END IF;
           RETURN NEW; END $$`,
      );
      await execSql(tm, 'CREATE TRIGGER trip BEFORE INSERT ON task_events FOR EACH ROW EXECUTE FUNCTION trip()');
      const { task } = await tm.createTask({ title: 'one' }, operator);
      const claimed = (await tm.claimTask({ agent: agent.id, ...(how === 'by id' ? { taskId: task.id } : {}), start: true }))!;
        expect(claimed.id).toBe(task.id);
      const before = await tm.getTask(task.id);
      const move = (reason: string) => tm.transitionTask({ taskId: task.id, to: 'review', actor: agent, claimToken: claimed.claimToken, reason });
      const sent = await statementsOf(() => move('explode').catch((err: unknown) => err));
      // The write failed with the COMMIT already sent (which then ended the aborted transaction).
      expect(sent.slice(-2)).toEqual(['pipelined: COMMIT', 'ROLLBACK']);
      await expect(move('explode')).rejects.toThrow(/exploded on purpose/);
      const after = await tm.getTask(task.id);
      expect([after.state, after.events.length, after.updatedAt]).toEqual([before.state, before.events.length, before.updatedAt]);
      // Every pooled connection is usable (none was left in an aborted transaction).
      await Promise.all(Array.from({ length: 8 }, () => tm.stats()));
      // The deadlock: the whole transaction runs again, and commits once.
      const moved = await move('deadlock');
      expect(moved.state).toBe('review');
      const events = (await tm.getTask(task.id)).events.filter((e) => e.type === 'task.transitioned' && e.data.reason === 'deadlock');
      expect(events).toHaveLength(1);
      expect((await tm.getTask(task.id)).events.filter((e) => e.type === 'task.transitioned').length).toBe(before.events.filter((e) => e.type === 'task.transitioned').length + 1);
    });
  }
  for (const how of ['by id', 'the next'] as const) {
    it(`a statement cancelled by the server (statement_timeout, pg_cancel_backend) fails its call with STORE_BUSY and writes nothing: a create in one statement and a move (a task claimed ${how})`, async () => {
      const tm = freshManager();
      onTestFinished(() => tm.close());
      // A row whose title or reason is 'cancel me' cancels the statement writing it.
      for (const [table, test] of [
        ['tasks', "NEW.title = 'cancel me'"],
        ['task_events', "NEW.data::jsonb->>'reason' = 'cancel me'"],
      ]) {
        await execSql(
          tm,
          `CREATE FUNCTION cancel_${table}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
             IF ${test} THEN PERFORM pg_cancel_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;
             RETURN NEW; END $$`,
        );
        await execSql(tm, `CREATE TRIGGER cancel_me BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION cancel_${table}()`);
      }
      const before = await tm.stats();
      expect(await codeOf(tm.createTask({ title: 'cancel me' }, operator))).toBe('STORE_BUSY');
      expect(await tm.stats()).toEqual(before);
      const { task } = await tm.createTask({ title: 'one' }, operator);
      const claimed = (await tm.claimTask({ agent: agent.id, ...(how === 'by id' ? { taskId: task.id } : {}), start: true }))!;
        expect(claimed.id).toBe(task.id);
      const held = await tm.getTask(task.id);
      const move = (reason: string) => tm.transitionTask({ taskId: task.id, to: 'review', actor: agent, claimToken: claimed.claimToken, reason });
      expect(await codeOf(move('cancel me'))).toBe('STORE_BUSY');
      expect(await tm.getTask(task.id)).toEqual(held);
      expect((await move('fine')).state).toBe('review');
    });
  }
  for (const how of ['by id', 'the next'] as const) {
    it(`a backend that dies mid-transaction fails that call with STORE_UNAVAILABLE and writes nothing; the process lives on and the next call works (a task claimed ${how})`, async () => {
      const tm = freshManager();
      onTestFinished(() => tm.close());
      // The event insert of a move whose reason is 'die' terminates its own backend.
      await execSql(
        tm,
        `CREATE FUNCTION die() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
           IF NEW.data::jsonb->>'reason' = 'die' THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
           RETURN NEW; END $$`,
      );
      await execSql(tm, 'CREATE TRIGGER die BEFORE INSERT ON task_events FOR EACH ROW EXECUTE FUNCTION die()');
      const { task } = await tm.createTask({ title: 'one' }, operator);
      const before = await tm.getTask(task.id);
      // In a process of its own: an 'error' event nobody hears ends a process, which a test
      // runner would only report beside the tests.
      const script = join(tempDir(), 'die.mjs');
      writeFileSync(
        script,
        `import { createTaskManager } from ${JSON.stringify(join(ROOT, 'dist/engine/index.js'))};
         import { createPgStore } from ${JSON.stringify(join(ROOT, 'dist/engine/postgres/task-store.js'))};
         const tm = createTaskManager({ store: createPgStore({ url: process.argv[2] }) });
         // Claimed by this process: by id (its moves take the full path), or the next (one round trip).
         const claimed = await tm.claimTask({ agent: 'agent-1', start: true${how === 'by id' ? `, taskId: ${task.id}` : ''} });
         const move = (reason) => tm.transitionTask({ taskId: ${task.id}, to: 'review', actor: { id: 'agent-1', role: 'agent' }, claimToken: claimed.claimToken, reason });
         const code = await move('die').then(() => 'none', (err) => err.code);
         await new Promise((r) => setTimeout(r, 300)); // the dead connection's 'error' event comes after
         const next = await move('fine');
         await tm.close();
         process.stdout.write(JSON.stringify({ code, next: next.state }));`,
      );
      const child = spawnSync(process.execPath, [script, tm.path], { encoding: 'utf8', timeout: 30_000 });
      expect(child.status, child.stderr).toBe(0);
      expect(JSON.parse(child.stdout)).toEqual({ code: 'STORE_UNAVAILABLE', next: 'review' });
      const after = await tm.getTask(task.id);
      expect(after.events.filter((e) => e.data.reason === 'die')).toEqual([]);
      expect(after.events.length).toBe(before.events.length + 3); // claimed, started, the fine move
    });
  }
});
