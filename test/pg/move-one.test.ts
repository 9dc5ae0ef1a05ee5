/**
 * A claimer's move of its own task in one round trip (src/engine/postgres/move-one.ts): the
 * store remembers the row its claim took, checks the move against it and writes only if the
 * row still holds it. These tests hold it to the full path's outcome, move by move, and attack
 * the memory: a row changed by another process, a token used by another agent or for another
 * task, a dependent created while the completion waits for the row.
 */
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Actor, TaskEvent, TransitionInput } from '../../src/engine/index.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { seenClaims } from '../../src/engine/postgres/move-one.js';
import type { TaskRow } from '../../src/engine/task-rows.js';
import { agent, codeOf, freshManager, operator, system, waitFor } from '../helpers.js';
import { execSql, querySql } from '../stores.js';

const worker = agent('worker-1');
type Manager = ReturnType<typeof freshManager>;

/** Counts the one-round-trip moves `tm`'s store sends. */
function countTrips(tm: Manager): { count: () => number } {
  const conn = (tm.store as PgTaskStore).conn as { oneTrip: PgTaskStore['conn']['oneTrip'] };
  const original = conn.oneTrip;
  let n = 0;
  conn.oneTrip = (what, statements) => {
    n++;
    return original(what, statements);
  };
  onTestFinished(() => void (conn.oneTrip = original));
  return { count: () => n };
}

/** A task's row and its events since the claim, without what differs between two tasks. */
async function outcome(tm: Manager, id: number, token: string) {
  const [row] = await querySql<Record<string, unknown>>(
    tm,
    'SELECT state, assignee, claim_token, worker_id, lease_expires_at IS NOT NULL AS leased, stale_since, result, attempts, unmet_deps FROM tasks WHERE id = $1',
    [id],
  );
  const events = (await tm.getTask(id)).events;
  const claimed = events.findIndex((e) => e.type === 'task.claimed');
  return {
    row: { ...row, claim_token: row!.claim_token === token ? 'the claim' : row!.claim_token } as Record<string, unknown>,
    events: events.slice(claimed + 1).map((e: TaskEvent) => [e.type, e.actor, e.actorRole, e.data]),
    ordered: events.every((e, i) => i === 0 || e.id > events[i - 1]!.id),
  };
}

type Move = Omit<TransitionInput, 'taskId' | 'claimToken'>;

describe('a claimer’s move in one round trip (PostgreSQL)', () => {
  const chains: Array<[string, { start: boolean; moves: (w: Actor) => Move[] }]> = [
    ['claimed → in_progress (the lease renewed, the worker kept)', { start: false, moves: (w) => [{ to: 'in_progress', actor: w }] }],
    ['in_progress → review → completed, with a result', { start: true, moves: (w) => [{ to: 'review', actor: w, result: { ok: 1 }, then: [{ to: 'completed', actor: system }] }] }],
    ['in_progress → review, then back to in_progress by an operator', { start: true, moves: (w) => [{ to: 'review', actor: w, reason: 'look', then: [{ to: 'in_progress', actor: operator, reason: 'again' }] }] }],
    ['claimed → pending (a release)', { start: false, moves: (w) => [{ to: 'pending', actor: w, reason: 'not mine' }] }],
    ['in_progress → waiting, then waiting → pending by an operator, as two moves', { start: true, moves: (w) => [{ to: 'waiting', actor: w }, { to: 'pending', actor: operator }] }],
    ['in_progress → failed (a task ended otherwise: always the full path)', { start: true, moves: (w) => [{ to: 'failed', actor: w, reason: 'gave up' }] }],
  ];

  for (const [name, { start, moves }] of chains) {
    it(`writes what the full path writes: ${name}`, async () => {
      const tm = freshManager();
      const other = freshManager({ path: tm.path }); // remembers no claim: always the full path
      const trips = countTrips(tm);
      const results: Array<Awaited<ReturnType<typeof outcome>>> = [];
      for (const [i, mover] of [tm, other].entries()) {
        // Each round its own agent: a task released earlier must not be the next one claimed.
        const w = agent(`worker-${i}`);
        const { task } = await tm.createTask({ title: 't', forAgent: w.id }, operator);
        const claimed = (await tm.claimTask({ agent: w.id, start }))!;
        expect(claimed.id).toBe(task.id);
        let last;
        for (const move of moves(w)) last = await mover.transitionTask({ ...move, taskId: task.id, claimToken: claimed.claimToken } as TransitionInput);
        const out = await outcome(tm, task.id, claimed.claimToken);
        expect(last!.state).toBe(out.row.state);
        expect(out.ordered).toBe(true);
        results.push({ ...out, row: { ...out.row, assignee: out.row.assignee === w.id ? 'the worker' : out.row.assignee } });
      }
      const named = (r: (typeof results)[number], id: string) => JSON.parse(JSON.stringify(r.events).replaceAll(`"${id}"`, '"the worker"'));
      expect({ ...results[0], events: named(results[0]!, 'worker-0') }).toEqual({ ...results[1], events: named(results[1]!, 'worker-1') });
      // Every move but one that fails the task went in one round trip, by the store that claimed.
      const all = moves(worker);
      expect(trips.count()).toBe(all.every((m) => m.to !== 'failed') ? all.length : 0);
    });
  }

  it('a row another process changed meanwhile: nothing is written by the one-round-trip move, and the full path decides from the row as it is', async () => {
    const tm = freshManager();
    const other = freshManager({ path: tm.path });
    const trips = countTrips(tm);
    // Moved by another process holding the same claim: the remembered row says in_progress,
    // where an operator may not move it to pending; the full path reads waiting, where one may.
    await tm.createTask({ title: 'moved elsewhere' }, operator);
    const a = (await tm.claimTask({ agent: worker.id, start: true }))!;
    await other.transitionTask({ taskId: a.id, to: 'waiting', actor: worker, claimToken: a.claimToken });
    const before = (await tm.getTask(a.id)).events.length;
    const moved = await tm.transitionTask({ taskId: a.id, to: 'pending', actor: operator, claimToken: a.claimToken, reason: 'unstick' });
    expect(moved.state).toBe('pending');
    const events = (await tm.getTask(a.id)).events;
    expect(events.length).toBe(before + 1);
    expect(events.at(-1)!.data).toEqual({ from: 'waiting', to: 'pending', reason: 'unstick' });
    expect(trips.count()).toBe(0);

    // Cancelled by an operator: the old claim is stale, whatever the memory says.
    await tm.createTask({ title: 'cancelled elsewhere' }, operator);
    const b = (await tm.claimTask({ agent: worker.id, start: true }))!;
    await other.cancelTask({ taskId: b.id, actor: operator, reason: 'stop' });
    const cancelled = await tm.getTask(b.id);
    expect(await codeOf(tm.transitionTask({ taskId: b.id, to: 'review', actor: worker, claimToken: b.claimToken }))).toBe('STALE_CLAIM');
    expect(await tm.getTask(b.id)).toEqual(cancelled);
    expect(trips.count()).toBe(1); // tried in one round trip, wrote nothing; the full path refused

    // Taken back by the sweep and claimed by another agent: the old claim writes nothing.
    await tm.createTask({ title: 'reclaimed' }, operator);
    const c = (await tm.claimTask({ agent: worker.id, start: true, leaseMs: 100 }))!;
    await execSql(tm, 'UPDATE tasks SET lease_expires_at = 0, stale_since = 0 WHERE id = $1', [c.id]);
    await other.sweep({ graceMs: 0 });
    const thief = (await other.claimTask({ agent: 'worker-2', taskId: c.id, start: true }))!;
    expect(thief.id).toBe(c.id);
    const held = await tm.getTask(c.id);
    expect(await codeOf(tm.transitionTask({ taskId: c.id, to: 'review', actor: worker, claimToken: c.claimToken, then: [{ to: 'completed', actor: system }] }))).toBe('STALE_CLAIM');
    expect(await tm.getTask(c.id)).toEqual(held);
    expect(trips.count()).toBe(2);
  });

  it('a dead claim is not tried in one round trip again: after the row was found changed, every later move of that claim reads the row first', async () => {
    const tm = freshManager();
    const other = freshManager({ path: tm.path });
    const trips = countTrips(tm);
    await tm.createTask({ title: 'cancelled elsewhere' }, operator);
    const c = (await tm.claimTask({ agent: worker.id, start: true }))!;
    await other.cancelTask({ taskId: c.id, actor: operator, reason: 'stop' });
    for (let i = 0; i < 5; i++) {
      expect(await codeOf(tm.transitionTask({ taskId: c.id, to: 'review', actor: worker, claimToken: c.claimToken }))).toBe('STALE_CLAIM');
    }
    // Once: without the forgetting, each of the five locked the row in a trip that wrote nothing.
    expect(trips.count()).toBe(1);
  });

  it('a BEGIN that fails alone writes nothing: the move writes only inside the transaction that holds the row’s lock', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 't' }, operator);
    const c = (await tm.claimTask({ agent: worker.id, start: true }))!;
    const before = await tm.getTask(task.id);
    // A stand-in for a BEGIN the server refuses on its own (a cancel landing on it): the
    // statements after it, each with its own Sync, would run in autocommit.
    const proto = pg.Client.prototype as unknown as { query: (...a: unknown[]) => unknown };
    const original = proto.query;
    let armed = true;
    proto.query = function (this: unknown, config: unknown, ...rest: unknown[]) {
      if (armed && config === 'BEGIN') {
        armed = false;
        return original.call(this, 'SELECT 1/0', ...rest);
      }
      return original.call(this, config, ...rest);
    };
    onTestFinished(() => void (proto.query = original));
    await expect(tm.transitionTask({ taskId: task.id, to: 'review', actor: worker, claimToken: c.claimToken })).rejects.toThrow(/division by zero/);
    proto.query = original;
    expect(await tm.getTask(task.id)).toEqual(before);
    // The claim is still good: the move goes through now.
    expect((await tm.transitionTask({ taskId: task.id, to: 'review', actor: worker, claimToken: c.claimToken })).state).toBe('review');
  });

  it('a hostile caller gains nothing from the memory: another agent with a leaked token, a token for another task, a move the rules refuse', async () => {
    const tm = freshManager();
    const other = freshManager({ path: tm.path });
    const intruder: Actor = agent('intruder');
    for (const [label, attack] of [
      ['another agent with the claimer’s token', (id: number, token: string) => ({ taskId: id, to: 'review', actor: intruder, claimToken: token })],
      ['the token of one task on another', (_id: number, token: string, otherId: number) => ({ taskId: otherId, to: 'review', actor: worker, claimToken: token })],
      ['a move the state machine has not', (id: number, token: string) => ({ taskId: id, to: 'completed', actor: worker, claimToken: token })],
      ['a verdict on its own work', (id: number, token: string) => ({ taskId: id, to: 'review', actor: worker, claimToken: token, then: [{ to: 'completed', actor: worker }] })],
    ] as const) {
      const codes: string[] = [];
      for (const mover of [tm, other]) {
        const { task: victim } = await tm.createTask({ title: `${label}: victim`, forAgent: worker.id }, operator);
        const claimed = (await tm.claimTask({ agent: worker.id, start: true }))!;
        expect(claimed.id).toBe(victim.id);
        const { task: bystander } = await tm.createTask({ title: `${label}: bystander`, forAgent: 'nobody' }, operator);
        const held = await Promise.all([tm.getTask(victim.id), tm.getTask(bystander.id)]);
        codes.push(await codeOf(mover.transitionTask(attack(victim.id, claimed.claimToken, bystander.id) as TransitionInput)));
        expect(await Promise.all([tm.getTask(victim.id), tm.getTask(bystander.id)])).toEqual(held);
      }
      expect(codes[0], label).not.toBe('NO_ERROR');
      expect(codes[0], label).toBe(codes[1]);
    }
  });

  it('a dependent created while the completion waits for the row is counted down: the write’s snapshot follows the lock', async () => {
    const tm = freshManager();
    const other = freshManager({ path: tm.path });
    const { task: first } = await tm.createTask({ title: 'first' }, operator);
    const claimed = (await tm.claimTask({ agent: worker.id, start: true }))!;
    expect(claimed.id).toBe(first.id);
    // The dependent's create holds `first` FOR SHARE, then sleeps in its dependency row's insert.
    await execSql(tm, `CREATE FUNCTION slow_dep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.6); RETURN NEW; END $$`);
    await execSql(tm, 'CREATE TRIGGER slow_dep BEFORE INSERT ON task_deps FOR EACH ROW EXECUTE FUNCTION slow_dep()');
    const creating = other.createTask({ title: 'after', dependsOn: [first.id] }, operator);
    await waitFor(async () => (await querySql(tm, "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'")).length > 0, 5000, 'the create to hold the row');
    const done = await tm.transitionTask({ taskId: first.id, to: 'review', actor: worker, claimToken: claimed.claimToken, then: [{ to: 'completed', actor: system }] });
    expect(done.state).toBe('completed');
    const { task: after } = await creating;
    const [row] = await querySql<{ unmet_deps: number }>(tm, 'SELECT unmet_deps FROM tasks WHERE id = $1', [after.id]);
    expect(row!.unmet_deps).toBe(0);
    expect((await tm.claimTask({ agent: worker.id }))?.id).toBe(after.id);
  });

  it('the memory is bounded: past its size the oldest claim is forgotten; a row that holds no claim is not kept', () => {
    const seen = seenClaims(2);
    const row = (id: number, token: string | null): TaskRow =>
      ({ id, state: 'in_progress', creator: 'op', creator_role: 'operator', assignee: 'w', claim_token: token, worker_id: null, lease_ms: 1000 }) as TaskRow;
    seen.remember(row(1, 'a'), 'a');
    seen.remember(row(2, 'b'), 'b');
    seen.remember(row(3, 'c'), 'c');
    expect([seen.get('a'), seen.get('b')?.id, seen.get('c')?.id]).toEqual([undefined, 2, 3]);
    seen.remember(row(2, null), 'b'); // completed: no claim left to move with
    expect(seen.get('b')).toBeUndefined();
    seen.remember(row(3, 'other'), 'c'); // the row holds another claim now
    expect(seen.get('c')).toBeUndefined();
  });
});
