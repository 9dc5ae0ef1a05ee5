/**
 * Runs, steps and screens on PostgreSQL (src/engine/postgres/runs.ts), called inside the
 * store's write transactions as the assembler will: fenced writes with their events, the
 * task's moves, a stale claim refused writing nothing, and writers of one run racing.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Query } from '../../src/engine/postgres/connection.js';
import { claimRun, pgRuns } from '../../src/engine/postgres/runs.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { ZERO_USAGE } from '../../src/engine/run-rows.js';
import type { Budget, Envelope, Fence, FinalPhase, Usage } from '../../src/engine/runs.js';
import { parseClaimInput } from '../../src/engine/schemas.js';
import type { TaskEvent } from '../../src/engine/types.js';
import { codeOf, freshManager, operator } from '../helpers.js';
import { openTaskStore } from '../stores.js';

const BUDGET: Budget = { maxSteps: 20, maxFailures: 3, maxWriteCalls: null, maxPending: null, deadlineAt: null, maxTokens: 1000, maxCost: null };
const used = (steps: number, tokens = 0): Usage => ({ ...ZERO_USAGE, steps, tokens });
const envelope = (runId: number, taskId: number, phase: FinalPhase, stop: string): Envelope => ({
  run_id: runId,
  task_id: taskId,
  phase,
  stop_reason: stop,
  goal_progress: { completed: ['a'], pending: [] },
  side_effects: [],
  evidence: ['seen'],
  acceptance: null,
  trace: { used_tools: ['click'], rejected_calls: [], pending_ids: [], step_count: 1 },
  safe_resume: { condition: 'after step 1', checkpoint_version: 1 },
});

type Body<T> = (q: Query, now: number, events: TaskEvent[]) => Promise<T>;

/** A task claimed and started with its run opened, as the daemon does it (claimRun). */
async function started() {
  const tm = freshManager();
  const store = tm.store as PgTaskStore;
  await tm.createTask({ title: 'run me' }, operator);
  const write = async <T>(body: Body<T>, s: PgTaskStore = store) => (await s.write('test', body)).value;
  const claim = () => write((q, now, ev) => claimRun(q, { ...parseClaimInput({ agent: 'a' }), start: true }, () => BUDGET, now, ev));
  const claimed = (await claim())!;
  const fence: Fence = { taskId: claimed.task.id, claimToken: claimed.task.claimToken, agent: 'a' };
  const runId = claimed.opened.run.id;
  const read = <T>(fn: (q: Query) => Promise<T>) => store.read(() => fn(store.conn.query));
  const count = async (table: string) => (await store.conn.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0]!.n;
  const task = async () => (await store.conn.query<{ state: string; attempts: number }>('SELECT state, attempts FROM tasks WHERE id = $1', [fence.taskId]))[0]!;
  return { tm, store, write, claim, claimed, fence, runId, read, count, task };
}

describe('runs on PostgreSQL', () => {
  it('claimRun opens a new run; nothing claimable is null', async () => {
    const { claimed, runId, read, store } = await started();
    expect(claimed.task.state).toBe('in_progress');
    expect(claimed.opened).toMatchObject({ resumed: false, steps: [], run: { id: runId, phase: 'running', budget: BUDGET, usage: ZERO_USAGE, restarts: 0, finishedAt: null } });
    const outcome = await store.write('again', (q, now, ev) => claimRun(q, parseClaimInput({ agent: 'b' }), () => BUDGET, now, ev));
    expect(outcome).toEqual({ value: null, events: [] });
    expect(await read((q) => pgRuns.runsOf(q, claimed.task.id))).toHaveLength(1);
    // The run.started event carries the budget in wire form.
    const [ev] = await store.conn.query<{ data: string }>("SELECT data FROM task_events WHERE type = 'run.started'");
    expect(JSON.parse(ev!.data)).toMatchObject({ run_id: runId, budget: { max_steps: 20 } });
  });

  it('begin and finish a step: usage, checkpoint, and a screen PNG round trip as bytea', async () => {
    const { fence, runId, write, read, store } = await started();
    const outcome = await store.write('begin', (q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'action', tool: 'click', args: { x: 1 }, idempotencyKey: 'k1' }, now, ev));
    const step = outcome.value;
    expect(step).toMatchObject({ runId, seq: 1, kind: 'action', status: 'started', tool: 'click', args: { x: 1 }, idempotencyKey: 'k1', finishedAt: null });
    expect(outcome.events.map((e) => [e.type, e.data])).toEqual([['run.step_started', { run_id: runId, seq: 1, kind: 'action', tool: 'click', intent: true }]]);
    expect(outcome.events[0]!.id).toBeGreaterThan(0);

    const bytes = new Uint8Array([9, 9, 0x89, 0x50, 0x4e, 0x47, 0x00, 0xff, 0x0d, 0x0a]);
    const png = bytes.subarray(2); // a view with an offset: only its own bytes are stored
    const done = await store.write('finish', (q, now, ev) =>
      pgRuns.finishStep(q, fence, { stepId: step.id, status: 'ok', result: { clicked: true }, durationMs: 12.6, tokens: 7, usage: used(1, 7), eventData: { progress: 0.5 }, screen: png }, now, ev),
    );
    expect(done.value).toMatchObject({ status: 'ok', result: { clicked: true }, durationMs: 13, tokens: 7, error: null });
    expect(done.events.map((e) => [e.type, e.data])).toEqual([
      ['run.step_finished', { run_id: runId, seq: 1, kind: 'action', tool: 'click', status: 'ok', duration_ms: 13, progress: 0.5 }],
    ]);
    const run = await read((q) => pgRuns.getRun(q, runId));
    expect(run).toMatchObject({ usage: used(1, 7), checkpointVersion: 1, steps: [{ seq: 1, status: 'ok' }], screen: { seq: 1, bytes: 8 } });
    expect(run.screen!.takenAt).toBe(run.steps[0]!.finishedAt);
    const screen = (await read((q) => pgRuns.getScreen(q, runId)))!;
    expect(Buffer.isBuffer(screen.png)).toBe(true);
    expect([...screen.png]).toEqual([...png]);
    expect(screen).toMatchObject({ seq: 1, bytes: 8 });
    // A failed step with its error: the error is in the step and in the event.
    const s2 = await write((q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'observe' }, now, ev));
    const failed = await store.write('fail', (q, now, ev) => pgRuns.finishStep(q, fence, { stepId: s2.id, status: 'failed', error: 'boom', durationMs: 1, usage: used(2, 7) }, now, ev));
    expect(failed.value).toMatchObject({ seq: 2, status: 'failed', error: 'boom', tokens: 0, tool: null, args: null });
    expect(failed.events[0]!.data).toMatchObject({ status: 'failed', error: 'boom', seq: 2 });
    // The screen stays the one step 1 took.
    expect((await read((q) => pgRuns.getRun(q, runId))).screen).toMatchObject({ seq: 1 });
    expect(await codeOf(write((q, now, ev) => pgRuns.finishStep(q, fence, { stepId: 9999, status: 'ok', durationMs: 1, usage: used(3) }, now, ev)))).toBe('VALIDATION_FAILED');
  });

  it('writeSteps: records and finishes in order, one event each, the usage written once', async () => {
    const { fence, runId, write, read, store } = await started();
    const s1 = await write((q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'action', tool: 'type' }, now, ev));
    let usageWrites = 0;
    const counting = (q: Query): Query => (text, params) => {
      if (/^UPDATE runs SET usage/.test(text)) usageWrites++;
      return q(text, params);
    };
    const outcome = await store.write('steps', (q, now, ev) => {
      usageWrites = 0; // a retried transaction counts again
      return pgRuns.writeSteps(counting(q), fence, [
        { finish: { stepId: s1.id, status: 'ok', durationMs: 4, usage: used(1) } },
        { record: { runId, kind: 'decide', status: 'ok', result: { next: 'rm' }, durationMs: 2.2, tokens: 11, startedAt: now - 5, usage: used(2, 11) } },
        { record: { runId, kind: 'action', status: 'rejected', tool: 'rm', args: ['-rf'], error: 'refused by policy', durationMs: 0, startedAt: now, usage: used(3, 11) } },
      ], now, ev);
    });
    expect(outcome.value.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'action', 'ok'], [2, 'decide', 'ok'], [3, 'action', 'rejected']]);
    expect(outcome.events.map((e) => [e.type, e.data.seq, e.data.status])).toEqual([
      ['run.step_finished', 1, 'ok'],
      ['run.step_finished', 2, 'ok'],
      ['run.step_finished', 3, 'rejected'],
    ]);
    expect(outcome.events[2]!.data.error).toBe('refused by policy');
    expect(usageWrites).toBe(1);
    const run = await read((q) => pgRuns.getRun(q, runId));
    expect(run).toMatchObject({ usage: used(3, 11), checkpointVersion: 3 });
    expect(run.steps[1]).toMatchObject({ result: { next: 'rm' }, tokens: 11, durationMs: 2 });
    expect(run.steps[2]).toMatchObject({ tool: 'rm', args: ['-rf'], error: 'refused by policy' });
    // Held-back writes ride on a beginStep, written before it in the same transaction.
    const s4 = await write((q, now, ev) =>
      pgRuns.beginStep(q, fence, { runId, kind: 'action', tool: 'save', before: [{ record: { runId, kind: 'decide', status: 'ok', durationMs: 1, startedAt: now, usage: used(4) } }] }, now, ev),
    );
    expect(s4.seq).toBe(5);
    expect((await read((q) => pgRuns.getRun(q, runId))).usage).toEqual(used(4));
    expect(await write((q, now, ev) => pgRuns.writeSteps(q, fence, [], now, ev))).toEqual([]);
  });

  it('writeSteps: a held-back read begun at its own time, and a read recorded whole with its key and screen', async () => {
    const { fence, runId, write, read, store } = await started();
    const outcome = await store.write('steps', (q, now, ev) =>
      pgRuns.writeSteps(q, fence, [
        { record: { runId, kind: 'decide', status: 'ok', durationMs: 1, startedAt: now - 9, usage: used(1) } },
        { record: { runId, kind: 'observe', status: 'ok', tool: 'screenshot', result: { w: 1 }, durationMs: 3, startedAt: now - 7, idempotencyKey: 'k-1', screen: new Uint8Array([137, 80, 78, 71]), usage: used(2) } },
        { begin: { runId, kind: 'action', tool: 'wait', args: { ms: 5 }, idempotencyKey: 'k-2', startedAt: now - 3 } },
      ], now, ev),
    );
    expect(outcome.value.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'decide', 'ok'], [2, 'observe', 'ok'], [3, 'action', 'started']]);
    expect(outcome.events.map((e) => [e.type, e.data.seq])).toEqual([['run.step_finished', 1], ['run.step_finished', 2], ['run.step_started', 3]]);
    const run = await read((q) => pgRuns.getRun(q, runId));
    expect(run.steps[1]).toMatchObject({ idempotencyKey: 'k-1', result: { w: 1 } });
    expect(run.steps[2]).toMatchObject({ idempotencyKey: 'k-2', status: 'started', startedAt: run.steps[2]!.startedAt });
    expect(run.steps[2]!.startedAt).toBe(run.steps[1]!.startedAt + 4);
    // The usage is that of the last write that carries one (a begin carries none).
    expect(run).toMatchObject({ usage: used(2), checkpointVersion: 3 });
    expect(run.screen).toMatchObject({ seq: 2 });
    const done = await write((q, now, ev) => pgRuns.writeSteps(q, fence, [{ finish: { stepId: run.steps[2]!.id, status: 'ok', durationMs: 5, usage: used(3) } }], now, ev));
    expect(done.map((s) => [s.seq, s.status])).toEqual([[3, 'ok']]);
  });

  it('finishRun: the run ends with its envelope, the task moves twice with the result, the control is cleared', async () => {
    const { fence, runId, write, read, store, claimed } = await started();
    await write((q, now) => q("INSERT INTO controls (task_id, state, reason, updated_at) VALUES ($1, 'paused', 'x', $2)", [fence.taskId, now]));
    const env = envelope(runId, fence.taskId, 'completed', 'goal_met');
    const outcome = await store.write('finish run', (q, now, ev) =>
      pgRuns.finishRun(q, fence, {
        runId,
        phase: 'completed',
        stopReason: 'goal_met',
        envelope: env,
        usage: used(1),
        moves: [{ to: 'review', by: 'assignee', reason: 'done' }, { to: 'completed', by: 'system', systemActor: 'acceptance', reason: 'accepted' }],
        result: { answer: 42 },
        before: [{ record: { runId, kind: 'decide', status: 'ok', durationMs: 1, startedAt: now, usage: used(1) } }],
      }, now, ev),
    );
    expect(outcome.value.run).toMatchObject({ phase: 'completed', stopReason: 'goal_met', envelope: env, usage: used(1) });
    expect(outcome.value.run.finishedAt).not.toBeNull();
    expect(outcome.value.task).toMatchObject({ state: 'completed', result: { answer: 42 } });
    expect(outcome.events.map((e) => [e.type, e.actor, e.data.to ?? e.data.phase])).toEqual([
      ['run.step_finished', 'a', undefined],
      ['run.finished', 'a', 'completed'],
      ['task.transitioned', 'a', 'review'],
      ['task.transitioned', 'acceptance', 'completed'],
    ]);
    expect((await store.conn.query('SELECT * FROM controls'))).toEqual([]);
    expect((await read((q) => pgRuns.getRun(q, runId))).steps).toHaveLength(1);
    expect((await store.getTask(claimed.task.id, false)).result).toEqual({ answer: 42 });
    // The run is closed: another finish is refused (and the task is no longer fenced anyway).
    expect(await codeOf(write((q, now, ev) => pgRuns.setPaused(q, fence, runId, true, 'x', now, ev)))).toBe('STALE_CLAIM');
  });

  it('setPaused and recordRestart: phase and count with their events', async () => {
    const { fence, runId, store, read } = await started();
    const paused = await store.write('pause', (q, now, ev) => pgRuns.setPaused(q, fence, runId, true, 'operator pause', now, ev));
    expect(paused.events.map((e) => [e.type, e.data])).toEqual([['run.paused', { run_id: runId, reason: 'operator pause' }]]);
    expect((await read((q) => pgRuns.getRun(q, runId))).phase).toBe('paused');
    const resumed = await store.write('resume', (q, now, ev) => pgRuns.setPaused(q, fence, runId, false, 'go on', now, ev));
    expect(resumed.events.map((e) => e.type)).toEqual(['run.resumed']);
    expect((await read((q) => pgRuns.getRun(q, runId))).phase).toBe('running');
    expect((await store.write('r', (q, now, ev) => pgRuns.recordRestart(q, fence, runId, 'loop', now, ev))).value).toBe(1);
    const second = await store.write('r', (q, now, ev) => pgRuns.recordRestart(q, fence, runId, 'loop again', now, ev));
    expect(second.value).toBe(2);
    expect(second.events.map((e) => [e.type, e.data])).toEqual([['run.restarted', { run_id: runId, restart: 2, reason: 'loop again' }]]);
    expect((await read((q) => pgRuns.getRun(q, runId))).restarts).toBe(2);
  });

  it('releaseRun: the task goes back to pending with its attempt given back; the next claim resumes the run with its steps', async () => {
    const { fence, runId, write, store, task, claim } = await started();
    const s1 = await write((q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'observe' }, now, ev));
    await write((q, now, ev) => pgRuns.finishStep(q, fence, { stepId: s1.id, status: 'ok', durationMs: 1, usage: used(1) }, now, ev));
    expect(await task()).toEqual({ state: 'in_progress', attempts: 1 });
    const released = await store.write('release', (q, now, ev) => pgRuns.releaseRun(q, fence, runId, 'shutdown', now, ev));
    expect(released.events.map((e) => [e.type, e.actor, e.data.to ?? e.data.reason])).toEqual([
      ['run.paused', 'a', 'shutdown'],
      ['task.transitioned', 'daemon', 'pending'],
    ]);
    expect(await task()).toEqual({ state: 'pending', attempts: 0 });
    const again = (await claim())!;
    expect(again.opened).toMatchObject({ resumed: true, resumedFrom: 'paused', run: { id: runId, phase: 'running', usage: used(1) } });
    expect(again.opened.steps.map((s) => [s.seq, s.status])).toEqual([[1, 'ok']]);
    expect(await task()).toEqual({ state: 'in_progress', attempts: 1 });
    // openRun on the run already open (same claim) resumes it too, from running.
    const f2 = { ...fence, claimToken: again.task.claimToken };
    const reopened = await store.write('open', (q, now, ev) => pgRuns.openRun(q, f2, BUDGET, now, ev));
    expect(reopened.value).toMatchObject({ resumed: true, resumedFrom: 'running' });
    expect(reopened.events.map((e) => [e.type, e.data])).toEqual([['run.resumed', { run_id: runId, reason: 'claimed again' }]]);
  });

  it('parkRun, then resumeRun: an unknown step is refused without a sideEffect (nothing written), then declared happened', async () => {
    const { fence, runId, write, read, store, task, count } = await started();
    const s1 = await write((q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'action', tool: 'pay' }, now, ev));
    await write((q, now, ev) => pgRuns.finishStep(q, fence, { stepId: s1.id, status: 'unknown', durationMs: 1, usage: used(1) }, now, ev));
    await write((q, now, ev) => pgRuns.recordRestart(q, fence, runId, 'stuck', now, ev));
    const env = envelope(runId, fence.taskId, 'waiting_input', 'restart_limit');
    const parked = await store.write('park', (q, now, ev) => pgRuns.parkRun(q, fence, { runId, stopReason: 'restart_limit', envelope: env, usage: used(1) }, now, ev));
    expect(parked.value.run).toMatchObject({ phase: 'waiting_input', stopReason: 'restart_limit', envelope: env, finishedAt: null });
    expect(parked.value.task).toMatchObject({ state: 'waiting', result: env });
    expect(parked.events.map((e) => [e.type, e.data.waiting ?? e.data.to])).toEqual([['run.paused', 'input'], ['task.transitioned', 'waiting']]);

    const events = await count('task_events');
    const refused = write((q, now, ev) => pgRuns.resumeRun(q, { taskId: fence.taskId, actor: operator }, now, ev));
    await expect(refused).rejects.toThrow(/step 1 \(pay\) may or may not have taken effect/);
    expect(await codeOf(refused)).toBe('VALIDATION_FAILED');
    expect(await count('task_events')).toBe(events);
    expect(await task()).toEqual({ state: 'waiting', attempts: 1 });

    const resumed = await store.write('resume', (q, now, ev) => pgRuns.resumeRun(q, { taskId: fence.taskId, actor: operator, sideEffect: 'happened', reason: 'checked the bank' }, now, ev));
    expect(resumed.value.state).toBe('pending');
    expect(resumed.events.map((e) => [e.type, e.actor])).toEqual([['task.transitioned', 'operator'], ['run.resume_requested', 'operator']]);
    expect(resumed.events[1]!.data).toEqual({ run_id: runId, waited_for: 'restart_limit', side_effect: 'happened', steps: [1], reason: 'checked the bank' });
    const run = await read((q) => pgRuns.getRun(q, runId));
    expect(run.steps[0]).toMatchObject({ status: 'ok', result: { declared: 'happened', by: 'operator' }, error: null });
    expect(run.restarts).toBe(0); // restart_limit: the operator's word is a fresh start
    expect(await task()).toEqual({ state: 'pending', attempts: 0 });
    // Nothing waits any more; an unknown task is not found.
    expect(await codeOf(write((q, now, ev) => pgRuns.resumeRun(q, { taskId: fence.taskId, actor: operator }, now, ev)))).toBe('INVALID_TRANSITION');
    expect(await codeOf(write((q, now, ev) => pgRuns.resumeRun(q, { taskId: 999, actor: operator }, now, ev)))).toBe('TASK_NOT_FOUND');
  });

  it('getRun, runsOf, getScreen: every run of a task in order; unknown runs', async () => {
    const { fence, runId, write, read, claim } = await started();
    expect(await read((q) => pgRuns.getScreen(q, runId))).toBeNull();
    expect((await read((q) => pgRuns.getRun(q, runId))).screen).toBeNull();
    await write((q, now, ev) =>
      pgRuns.finishRun(q, fence, { runId, phase: 'failed', stopReason: 'tool_failed', envelope: envelope(runId, fence.taskId, 'failed', 'tool_failed'), usage: used(0), moves: [{ to: 'pending', by: 'system', reason: 'retry' }] }, now, ev),
    );
    const second = (await claim())!;
    expect(second.opened.resumed).toBe(false);
    const runs = await read((q) => pgRuns.runsOf(q, fence.taskId));
    expect(runs.map((r) => [r.id, r.phase])).toEqual([[runId, 'failed'], [second.opened.run.id, 'running']]);
    expect(await read((q) => pgRuns.runsOf(q, 999))).toEqual([]);
    expect(await codeOf(read((q) => pgRuns.getRun(q, 999)))).toBe('RUN_NOT_FOUND');
    expect(await read((q) => pgRuns.getScreen(q, 999))).toBeNull();
  });

  it('a stale fence is refused STALE_CLAIM by every fenced write, and nothing is written', async () => {
    const { fence, runId, write, count, task, read } = await started();
    const stale = { ...fence, claimToken: 'not-the-token' };
    const before = { events: await count('task_events'), steps: await count('steps'), task: await task(), run: await read((q) => pgRuns.getRun(q, runId)) };
    const env = envelope(runId, fence.taskId, 'completed', 'goal_met');
    const attempts: Array<(q: Query, now: number, ev: TaskEvent[]) => Promise<unknown>> = [
      (q, now, ev) => pgRuns.openRun(q, stale, BUDGET, now, ev),
      (q, now, ev) => pgRuns.beginStep(q, stale, { runId, kind: 'observe' }, now, ev),
      (q, now, ev) => pgRuns.writeSteps(q, stale, [{ record: { runId, kind: 'decide', status: 'ok', durationMs: 1, startedAt: now, usage: used(1) } }], now, ev),
      (q, now, ev) => pgRuns.setPaused(q, stale, runId, true, 'x', now, ev),
      (q, now, ev) => pgRuns.recordRestart(q, stale, runId, 'x', now, ev),
      (q, now, ev) => pgRuns.finishRun(q, stale, { runId, phase: 'completed', stopReason: 'goal_met', envelope: env, usage: used(1), moves: [{ to: 'review', by: 'assignee' }] }, now, ev),
      (q, now, ev) => pgRuns.parkRun(q, stale, { runId, stopReason: 'need_input', envelope: env, usage: used(1) }, now, ev),
      (q, now, ev) => pgRuns.releaseRun(q, stale, runId, 'x', now, ev),
    ];
    for (const body of attempts) expect(await codeOf(write(body))).toBe('STALE_CLAIM');
    await expect(write((q, now, ev) => pgRuns.beginStep(q, stale, { runId, kind: 'observe' }, now, ev))).rejects.toThrow(
      `task ${fence.taskId}: the claim of a is no longer current (task is in_progress)`,
    );
    expect(await codeOf(write((q, now, ev) => pgRuns.beginStep(q, { ...fence, taskId: 999 }, { runId, kind: 'observe' }, now, ev)))).toBe('TASK_NOT_FOUND');
    // The right claim on a run that is not this task's open run.
    expect(await codeOf(write((q, now, ev) => pgRuns.beginStep(q, fence, { runId: 999, kind: 'observe' }, now, ev)))).toBe('INVALID_TRANSITION');
    expect({ events: await count('task_events'), steps: await count('steps'), task: await task(), run: await read((q) => pgRuns.getRun(q, runId)) }).toEqual(before);
  });

  it('two stores racing beginStep on one run: distinct seqs, no error; racing resumeRun: exactly one wins', async () => {
    const { fence, runId, store, tm, read, write } = await started();
    const other = openTaskStore(tm.path) as PgTaskStore;
    onTestFinished(() => other.close());
    const begin = (s: PgTaskStore, i: number) => s.write('begin', (q, now, ev) => pgRuns.beginStep(q, fence, { runId, kind: 'action', tool: `t${i}` }, now, ev));
    const steps = await Promise.all(Array.from({ length: 16 }, (_, i) => begin(i % 2 === 0 ? store : other, i)));
    const seqs = steps.map((o) => o.value.seq).sort((a, b) => a - b);
    expect(seqs).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
    // Each event names the seq its step got.
    for (const o of steps) expect(o.events[0]!.data.seq).toBe(o.value.seq);
    expect((await read((q) => pgRuns.getRun(q, runId))).steps).toHaveLength(16);

    const env = envelope(runId, fence.taskId, 'waiting_input', 'need_input');
    await write((q, now, ev) => pgRuns.parkRun(q, fence, { runId, stopReason: 'need_input', envelope: env, usage: used(16) }, now, ev));
    // The started steps are not unknown (only a crash's lost outcome is): no declaration needed.
    const resume = (s: PgTaskStore) => s.write('resume', (q, now, ev) => pgRuns.resumeRun(q, { taskId: fence.taskId, actor: operator }, now, ev));
    const results = await Promise.allSettled([resume(store), resume(other)]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const lost = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(await codeOf(Promise.reject(lost.reason))).toBe('INVALID_TRANSITION');
    const requested = await store.conn.query("SELECT id FROM task_events WHERE type = 'run.resume_requested'");
    expect(requested).toHaveLength(1);
  });
});
