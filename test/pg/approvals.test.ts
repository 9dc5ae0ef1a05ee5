/**
 * Approvals and stop/pause/resume controls on PostgreSQL (postgres/approvals.ts, controls.ts),
 * called as the assembly will call them: writes in the store's transactions, reads on its
 * autocommit connection. The races that SQLite's single writer ruled out are forced here
 * (race.ts): a raw connection holds the contended row lock while two stores queue behind
 * it, then lets go. Breakers: breakers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { Approval, ParkInput } from '../../src/engine/approvals.js';
import type { ControlRequest } from '../../src/engine/run-store.js';
import type { Fence, Usage } from '../../src/engine/runs.js';
import type { Actor, TaskEvent } from '../../src/engine/types.js';
import { pgApprovals } from '../../src/engine/postgres/approvals.js';
import { claimTask } from '../../src/engine/postgres/claim.js';
import { pgControls } from '../../src/engine/postgres/controls.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { agent, codeOf, fakeClock, freshManager, operator, waitFor } from '../helpers.js';
import { type Manager, behindLock, forcedRounds, second, sql, storeOf } from './race.js';

const USAGE: Usage = { steps: 1, writeCalls: 0, pending: 0, tokens: 5, cost: 0, consecutiveFailures: 0 };
const reviewer: Actor = { id: 'rita', role: 'reviewer' };
const QUEUED = 40;

const value = async <T>(p: Promise<{ value: T }>): Promise<T> => (await p).value;

/** A task claimed and started by `worker`, with a run and a started tool step written in plain SQL. */
async function runningTask(tm: Manager, creator: Actor = operator, worker = 'worker') {
  const { task } = await tm.createTask({ title: 'needs approval' }, creator);
  const claimed = (await tm.claimTask({ agent: worker, taskId: task.id, start: true, leaseMs: 60_000 }))!;
  const [run] = await sql<{ id: number }>(tm, "INSERT INTO runs (task_id, phase, budget, usage, started_at) VALUES ($1, 'running', '{}', '{}', 0) RETURNING id", [task.id]);
  const [step] = await sql<{ id: number }>(
    tm,
    "INSERT INTO steps (run_id, seq, kind, status, tool, args, started_at) VALUES ($1, 1, 'tool', 'started', 'deploy', '{}', 0) RETURNING id",
    [run!.id],
  );
  const fence: Fence = { taskId: task.id, claimToken: claimed.claimToken, agent: worker };
  const input: ParkInput = { runId: run!.id, stepId: step!.id, tool: 'deploy', args: { env: 'prod' }, fingerprint: 'fp', expiresAt: null };
  return { taskId: task.id, fence, input };
}

const park = (tm: Manager, f: Fence, input: ParkInput) => storeOf(tm).write('park', (q, now, ev) => pgApprovals.park(q, f, input, USAGE, now, ev));
const decide = (s: PgTaskStore, approvalId: number, actor: Actor, approve = true, reason?: string) =>
  s.write('decide approval', (q, now, ev) => pgApprovals.decide(q, { approvalId, approve, actor, ...(reason === undefined ? {} : { reason }) }, now, ev));
const reclaim = async (tm: Manager, taskId: number, worker = 'worker'): Promise<Fence> => {
  const c = (await tm.claimTask({ agent: worker, taskId, start: true, leaseMs: 60_000 }))!;
  return { taskId, claimToken: c.claimToken, agent: worker };
};
/** As the SQLite assembly does: a stop also revokes the approvals not yet used, in the same transaction. */
const setControl = (s: PgTaskStore, request: ControlRequest) =>
  value(
    s.write('control', async (q, now, ev) => {
      const affected = await pgControls.set(q, request, now, ev);
      if (request.state === 'stopped') await pgApprovals.revokeUnused(q, request.target === 'all' ? 'all' : affected, now, ev);
      return affected;
    }),
  );
const eventTypes = (events: TaskEvent[]) => events.map((e) => e.type);

describe('approvals on PostgreSQL', () => {
  it('park → a forbidden decider is refused → approve → use once; reads see each state', async () => {
    const tm = freshManager({ clock: fakeClock() });
    const { taskId, fence, input } = await runningTask(tm);
    const parked = await park(tm, fence, input);
    expect(parked.value).toMatchObject({ taskId, runId: input.runId, stepId: input.stepId, tool: 'deploy', args: { env: 'prod' }, state: 'pending', decidedBy: null });
    const id = parked.value.id;
    expect(eventTypes(parked.events)).toEqual(['approval.requested', 'run.paused', 'task.transitioned']);
    expect(parked.events[2]).toMatchObject({ actor: 'worker', data: { from: 'in_progress', to: 'waiting', reason: `approval ${id} of deploy` } });
    expect(parked.events[0]!.data).toEqual({ approval_id: id, run_id: input.runId, tool: 'deploy', args: { env: 'prod' }, expires_at: null });
    expect(parked.events[1]!.data).toEqual({ run_id: input.runId, reason: `waiting for approval ${id}` });
    expect((await tm.getTask(taskId)).state).toBe('waiting');
    expect(await sql(tm, 'SELECT r.phase, r.usage, s.status FROM runs r JOIN steps s ON s.run_id = r.id WHERE r.id = $1', [input.runId])).toEqual([
      { phase: 'waiting_approval', usage: JSON.stringify(USAGE), status: 'waiting_approval' },
    ]);
    const q = storeOf(tm).conn.query;
    expect(await pgApprovals.forStep(q, input.stepId)).toEqual(parked.value);
    expect(await pgApprovals.forStep(q, 999)).toBeUndefined();
    expect(await pgApprovals.get(q, id)).toEqual(parked.value);
    expect(await codeOf(pgApprovals.get(q, 999))).toBe('APPROVAL_NOT_FOUND');
    expect(await codeOf(decide(storeOf(tm), 999, operator))).toBe('APPROVAL_NOT_FOUND');
    expect(await pgApprovals.count(q, 'pending')).toBe(1);

    // An agent may not decide, nor a reviewer who bears the assignee's name: nothing written.
    const before = await sql(tm, 'SELECT count(*)::int AS n FROM task_events');
    expect(await codeOf(decide(storeOf(tm), id, agent('worker')))).toBe('FORBIDDEN');
    expect(await codeOf(decide(storeOf(tm), id, { id: 'worker', role: 'reviewer' }))).toBe('FORBIDDEN');
    expect(await sql(tm, 'SELECT count(*)::int AS n FROM task_events')).toEqual(before);
    expect((await pgApprovals.get(q, id)).state).toBe('pending');

    const decided = await decide(storeOf(tm), id, reviewer, true, 'looks fine');
    expect(decided.value).toMatchObject({ state: 'approved', reason: 'looks fine', decidedBy: 'rita', decidedByRole: 'reviewer', decidedAt: decided.events[0]!.createdAt });
    expect(eventTypes(decided.events)).toEqual(['approval.decided', 'task.transitioned']);
    expect(decided.events[0]).toMatchObject({ actor: 'rita', actorRole: 'reviewer', data: { approval_id: id, decision: 'approved', reason: 'looks fine' } });
    expect(decided.events[1]).toMatchObject({ actor: 'approval', actorRole: 'system', data: { from: 'waiting', to: 'pending', reason: `approval ${id} approved` } });
    const requeued = await tm.getTask(taskId);
    expect(requeued.state).toBe('pending');
    expect(requeued.attempts).toBe(0); // waiting for a person was not an attempt
    const refusal = await decide(storeOf(tm), id, operator, false).catch((e: Error & { code: string }) => e);
    expect(refusal).toMatchObject({ code: 'INVALID_TRANSITION', message: `approval ${id} is already approved` });

    // The old claim is gone: using the grant with it is STALE_CLAIM, and writes nothing.
    const fresh = await reclaim(tm, taskId);
    const use = (f: Fence) => storeOf(tm).write('use approval', (qq, now, ev) => pgApprovals.use(qq, f, id, now, ev));
    expect(await codeOf(use(fence))).toBe('STALE_CLAIM');
    expect((await pgApprovals.get(q, id)).state).toBe('approved');
    const used = await use(fresh);
    expect(used.events).toMatchObject([{ type: 'approval.used', actor: 'worker', data: { approval_id: id } }]);
    expect(await pgApprovals.get(q, id)).toMatchObject({ state: 'used', reason: 'looks fine', decidedBy: 'rita', decidedByRole: 'reviewer' });
    const again = await use(fresh).catch((e: Error & { code: string }) => e);
    expect(again).toMatchObject({ code: 'INVALID_TRANSITION', message: `approval ${id} is used, not approved` });
    expect(await codeOf(storeOf(tm).write('use', (qq, now, ev) => pgApprovals.use(qq, fresh, 999, now, ev)))).toBe('APPROVAL_NOT_FOUND');
  });

  it('a stale claim cannot park: STALE_CLAIM (TASK_NOT_FOUND for no task), and nothing is written', async () => {
    const tm = freshManager({ clock: fakeClock() });
    const { taskId, fence, input } = await runningTask(tm);
    const events = await sql(tm, 'SELECT count(*)::int AS n FROM task_events');
    const stale = await park(tm, { ...fence, claimToken: 'not-the-token' }, input).catch((e: Error & { code: string }) => e);
    expect(stale).toMatchObject({ code: 'STALE_CLAIM', message: `task ${taskId}: the claim of worker is no longer current (task is in_progress)` });
    expect(await codeOf(park(tm, { ...fence, taskId: 999 }, input))).toBe('TASK_NOT_FOUND');
    expect(await sql(tm, 'SELECT count(*)::int AS n FROM approvals')).toEqual([{ n: 0 }]);
    expect(await sql(tm, 'SELECT count(*)::int AS n FROM task_events')).toEqual(events);
    expect((await tm.getTask(taskId)).state).toBe('in_progress');
    expect(await sql(tm, 'SELECT phase FROM runs WHERE id = $1', [input.runId])).toEqual([{ phase: 'running' }]);
  });

  it('reject; repark a request still pending; expiry re-queues; list and count by state', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const s = storeOf(tm);
    const q = s.conn.query;
    const a = await runningTask(tm);
    const rejected = (await park(tm, a.fence, a.input)).value;
    expect((await decide(s, rejected.id, operator, false, 'no')).value).toMatchObject({ state: 'rejected', reason: 'no', decidedByRole: 'operator' });
    expect((await tm.getTask(a.taskId)).state).toBe('pending');

    // Re-queued before a decision (an operator's move): the next claim parks the run again.
    const b = await runningTask(tm);
    const pending = (await park(tm, b.fence, { ...b.input, expiresAt: clock.now() + 1_000 })).value;
    expect(pending.expiresAt).toBe(clock.now() + 1_000);
    await tm.transitionTask({ taskId: b.taskId, to: 'pending', actor: operator });
    const again = await reclaim(tm, b.taskId);
    const reparked = await s.write('repark', (qq, now, ev) => pgApprovals.repark(qq, again, pending, now, ev));
    expect(eventTypes(reparked.events)).toEqual(['run.paused', 'task.transitioned']);
    expect(reparked.events[0]!.data).toEqual({ run_id: b.input.runId, reason: `still waiting for approval ${pending.id}` });
    expect(await sql(tm, 'SELECT phase FROM runs WHERE id = $1', [b.input.runId])).toEqual([{ phase: 'waiting_approval' }]);
    expect(await codeOf(s.write('repark', (qq, now, ev) => pgApprovals.repark(qq, b.fence, pending, now, ev)))).toBe('STALE_CLAIM');

    const expire = () => s.write('expire approvals', (qq, now, ev) => pgApprovals.expire(qq, now, ev));
    expect((await expire()).value).toEqual([]); // not due yet
    clock.advance(1_000);
    const expired = await expire();
    expect(expired.value).toEqual([pending.id]);
    expect(expired.events).toMatchObject([
      { type: 'approval.decided', actor: 'approval', actorRole: 'system', data: { approval_id: pending.id, decision: 'expired' } },
      { type: 'task.transitioned', actor: 'approval', data: { to: 'pending', reason: `approval ${pending.id} expired` } },
    ]);
    expect(await pgApprovals.get(q, pending.id)).toMatchObject({ state: 'expired', reason: 'expired before a decision', decidedBy: 'approval', decidedByRole: 'system', decidedAt: clock.now() });
    expect((await tm.getTask(b.taskId)).state).toBe('pending');
    expect((await expire()).value).toEqual([]);

    expect((await pgApprovals.list(q, undefined, 10)).map((x) => x.id)).toEqual([pending.id, rejected.id]);
    expect((await pgApprovals.list(q, undefined, 1)).map((x) => x.id)).toEqual([pending.id]);
    expect((await pgApprovals.list(q, 'rejected', 10)).map((x) => x.id)).toEqual([rejected.id]);
    expect(await pgApprovals.count(q, 'expired')).toBe(1);
    expect(await pgApprovals.count(q, 'pending')).toBe(0);
  });

  it('two processes decide the same approval at once: exactly one decision, the other refused as already decided', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const other = second(tm, clock);
    const forced = forcedRounds();
    for (let round = 0; round < 3; round++) {
      const { taskId, fence, input } = await runningTask(tm);
      const { id } = (await park(tm, fence, input)).value;
      const results = await behindLock(tm, 'SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', [taskId], () => [
        decide(storeOf(tm), id, operator, true),
        decide(other, id, reviewer, false),
      ]);
      forced.add(results);
      const won = results.filter((r) => r.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const state = (won[0] as PromiseFulfilledResult<{ value: Approval }>).value.value.state;
      const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toMatchObject({ code: 'INVALID_TRANSITION', message: `approval ${id} is already ${state}` });
      expect(await sql(tm, "SELECT count(*)::int AS n FROM task_events WHERE type = 'approval.decided' AND task_id = $1", [taskId])).toEqual([{ n: 1 }]);
      expect(await sql(tm, "SELECT count(*)::int AS n FROM task_events WHERE type = 'task.transitioned' AND data::jsonb->>'to' = 'pending' AND task_id = $1", [taskId])).toEqual([{ n: 1 }]);
      expect((await tm.getTask(taskId)).attempts).toBe(0);
    }
    expect(forced.n, 'rounds in which both deciders waited for the same lock').toBeGreaterThan(0);
  });

  it('expiry racing a decision: one of them decides the approval, the other does nothing', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const other = second(tm, clock);
    const forced = forcedRounds();
    const outcomes = new Set<string>();
    for (let round = 0; round < 4; round++) {
      const { taskId, fence, input } = await runningTask(tm);
      const { id } = (await park(tm, fence, { ...input, expiresAt: clock.now() })).value;
      const racers = (): Array<Promise<unknown>> => [
        decide(storeOf(tm), id, operator, true),
        other.write('expire approvals', (q, now, ev) => pgApprovals.expire(q, now, ev)),
      ];
      const raced = await behindLock(tm, 'SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', [taskId], racers);
      forced.add(raced);
      const [decided, expired] = raced;
      const state = (await pgApprovals.get(storeOf(tm).conn.query, id)).state;
      if (state === 'approved') {
        expect(decided!.status).toBe('fulfilled');
        expect(expired).toMatchObject({ status: 'fulfilled', value: { value: [], events: [] } });
      } else {
        expect(state).toBe('expired');
        expect(expired).toMatchObject({ status: 'fulfilled', value: { value: [id] } });
        expect((decided as PromiseRejectedResult).reason).toMatchObject({ code: 'INVALID_TRANSITION', message: `approval ${id} is already expired` });
      }
      outcomes.add(state);
      expect(await sql(tm, "SELECT count(*)::int AS n FROM task_events WHERE type = 'approval.decided' AND task_id = $1", [taskId])).toEqual([{ n: 1 }]);
      expect((await tm.getTask(taskId)).state).toBe('pending');
    }
    expect([...outcomes].every((o) => o === 'approved' || o === 'expired')).toBe(true);
    expect(forced.n, 'rounds in which the decision and the expiry waited for the same lock').toBeGreaterThan(0);
  });
});

describe('controls on PostgreSQL', () => {
  it('stop, pause and resume one task: who may, what each does, get and list', async () => {
    const tm = freshManager({ clock: fakeClock() });
    const s = storeOf(tm);
    const q = s.conn.query;
    const alice = agent('alice');
    const { task: never } = await tm.createTask({ title: 'never ran' }, operator);
    expect(await setControl(s, { target: [never.id], state: 'stopped', actor: operator })).toEqual([never.id]);
    expect((await tm.getTask(never.id)).state).toBe('cancelled'); // nothing ran: a stop cancels
    expect(await pgControls.get(q, never.id)).toBe('running');
    const terminal = await setControl(s, { target: [never.id], state: 'stopped', actor: operator }).catch((e: Error & { code: string }) => e);
    expect(terminal).toMatchObject({ code: 'INVALID_TRANSITION', message: `task ${never.id} is cancelled; there is no run to stop` });
    expect(await codeOf(setControl(s, { target: [999], state: 'paused', actor: operator }))).toBe('TASK_NOT_FOUND');

    const { taskId } = await runningTask(tm, alice);
    expect(await codeOf(setControl(s, { target: [taskId], state: 'paused', actor: agent('bob') }))).toBe('FORBIDDEN');
    const resumeUnpaused = await setControl(s, { target: [taskId], state: 'running', actor: alice }).catch((e: Error & { code: string }) => e);
    expect(resumeUnpaused).toMatchObject({ code: 'INVALID_TRANSITION', message: `task ${taskId} is not paused (control: running)` });
    const paused = await s.write('control', (qq, now, ev) => pgControls.set(qq, { target: [taskId], state: 'paused', actor: operator, reason: 'lunch' }, now, ev));
    expect(paused.value).toEqual([taskId]);
    expect(paused.events).toMatchObject([{ type: 'run.pause_requested', actor: 'operator', data: { reason: 'lunch' } }]);
    expect(await pgControls.get(q, taskId)).toBe('paused');
    expect(await pgControls.list(q)).toEqual(new Map([[taskId, 'paused']]));
    const notHers = await setControl(s, { target: [taskId], state: 'running', actor: alice }).catch((e: Error & { code: string }) => e);
    expect(notHers).toMatchObject({ code: 'FORBIDDEN', message: `task ${taskId}: paused by the operator, so only an operator may resume it (agent alice may not)` });
    const resumed = await s.write('control', (qq, now, ev) => pgControls.set(qq, { target: [taskId], state: 'running', actor: operator }, now, ev));
    expect(resumed.events).toMatchObject([{ type: 'run.resume_requested', data: { reason: 'user_resume' } }]);
    expect(await pgControls.list(q)).toEqual(new Map());

    // Her own pause she may lift; a stop wins over a later pause.
    await setControl(s, { target: [taskId], state: 'paused', actor: alice });
    expect(await setControl(s, { target: [taskId], state: 'running', actor: alice })).toEqual([taskId]);
    const stopped = await s.write('control', (qq, now, ev) => pgControls.set(qq, { target: [taskId], state: 'stopped', actor: alice }, now, ev));
    expect(stopped.events).toMatchObject([{ type: 'run.stop_requested', actor: 'alice', data: { reason: 'user_stop' } }]);
    expect(await setControl(s, { target: [taskId], state: 'paused', actor: operator })).toEqual([]);
    expect(await pgControls.get(q, taskId)).toBe('stopped');
  });

  it("a stop of 'all' stops every live run, re-queues parked ones and revokes unused approvals", async () => {
    const tm = freshManager({ clock: fakeClock() });
    const s = storeOf(tm);
    const q = s.conn.query;
    const parked = await runningTask(tm);
    const waiting = (await park(tm, parked.fence, parked.input)).value;
    const granted = await runningTask(tm);
    const grant = (await park(tm, granted.fence, granted.input)).value;
    await decide(s, grant.id, operator); // approved, not yet used: its task is pending with an open run
    const live = await runningTask(tm);
    const { task: idle } = await tm.createTask({ title: 'not started' }, operator);

    expect(await setControl(s, { target: 'all', state: 'running', actor: operator })).toEqual([]); // nothing paused
    expect(await setControl(s, { target: 'all', state: 'paused', actor: operator })).toEqual([parked.taskId, granted.taskId, live.taskId]);
    const stop = await s.write('control', async (qq, now, ev) => {
      const affected = await pgControls.set(qq, { target: 'all', state: 'stopped', actor: operator }, now, ev);
      return { affected, revoked: await pgApprovals.revokeUnused(qq, 'all', now, ev) };
    });
    expect(stop.value).toEqual({ affected: [parked.taskId, granted.taskId, live.taskId], revoked: 2 });
    expect(stop.events.filter((e) => e.type === 'approval.decided')).toMatchObject([
      { taskId: parked.taskId, actor: 'control', actorRole: 'system', data: { approval_id: waiting.id, decision: 'revoked' } },
      { taskId: granted.taskId, actor: 'control', data: { approval_id: grant.id, decision: 'revoked' } },
    ]);
    expect(stop.events.find((e) => e.taskId === parked.taskId && e.type === 'task.transitioned')).toMatchObject({ actor: 'control', data: { from: 'waiting', to: 'pending' } });
    expect(await pgControls.list(q)).toEqual(new Map([[parked.taskId, 'stopped'], [granted.taskId, 'stopped'], [live.taskId, 'stopped']]));
    expect((await tm.getTask(parked.taskId)).state).toBe('pending');
    expect((await tm.getTask(idle.id)).state).toBe('pending');
    expect(await pgControls.get(q, idle.id)).toBe('running');
    expect(await pgApprovals.get(q, grant.id)).toMatchObject({ state: 'revoked', reason: 'revoked by stop', decidedBy: 'control', decidedByRole: 'system' });
    expect(await pgApprovals.count(q, 'revoked')).toBe(2);
    // A stop of named tasks revokes only theirs (as the assembly passes the affected ids).
    const more = await runningTask(tm);
    const mine = (await park(tm, more.fence, more.input)).value;
    const other = await runningTask(tm);
    const theirs = (await park(tm, other.fence, other.input)).value;
    expect(await setControl(s, { target: [more.taskId], state: 'stopped', actor: operator })).toEqual([more.taskId]);
    expect((await pgApprovals.get(q, mine.id)).state).toBe('revoked');
    expect((await pgApprovals.get(q, theirs.id)).state).toBe('pending');
  });

  it("a stop of 'all' while another process starts runs: every run it saw is stopped once, every other one starts untouched", async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const other = second(tm, clock);
    const started: number[] = [];
    for (let i = 0; i < 4; i++) started.push((await runningTask(tm)).taskId);
    await tm.createTasks(Array.from({ length: QUEUED }, (_, i) => ({ title: `queued ${i}` })), operator);
    // The other process claims and opens runs one by one, as claimRun does, while the stop runs.
    const opened: number[] = [];
    const startRuns = (async () => {
      for (;;) {
        const task = await value(
          other.write('claim run', async (q, now, ev) => {
            const t = await claimTask(q, { agent: 'w2', start: true, leaseMs: 60_000 }, now, ev);
            if (t !== null) await q("INSERT INTO runs (task_id, phase, budget, usage, started_at) VALUES ($1, 'running', '{}', '{}', $2)", [t.id, now]);
            return t;
          }),
        );
        if (task === null) return;
        opened.push(task.id);
      }
    })();
    await waitFor(() => opened.length >= 3);
    const before = [...opened];
    const affected = await setControl(storeOf(tm), { target: 'all', state: 'stopped', actor: operator });
    const during = opened.length;
    await startRuns;
    expect(during).toBeLessThan(QUEUED); // the stop ran while runs were still starting
    for (const id of [...started, ...before]) expect(affected).toContain(id);
    expect(opened).toHaveLength(QUEUED);
    expect(new Set(affected).size).toBe(affected.length);
    const stops = await sql<{ task_id: number; n: number }>(tm, "SELECT task_id, count(*)::int AS n FROM task_events WHERE type = 'run.stop_requested' GROUP BY task_id ORDER BY task_id");
    expect(stops).toEqual([...affected].sort((a, b) => a - b).map((id) => ({ task_id: id, n: 1 })));
    const controls = await pgControls.list(storeOf(tm).conn.query);
    expect([...controls.keys()].sort((a, b) => a - b)).toEqual([...affected].sort((a, b) => a - b));
    // A run the stop did not see was claimed after it: nothing cancelled, nothing lost.
    const states = await sql<{ state: string; n: number }>(tm, 'SELECT state, count(*)::int AS n FROM tasks GROUP BY state');
    expect(states).toEqual([{ state: 'in_progress', n: QUEUED + 4 }]);
  });
});
