/**
 * What the run and schedule ports refuse before any statement runs, the same on both stores:
 * ids past a bigint or not integers, NUL and lone surrogates in the text a step stores,
 * reasons that are not one line, a schedule that could never fire or prints escape sequences.
 * Each refusal is VALIDATION_FAILED and writes nothing (the event log is as it was). Before,
 * PostgreSQL answered most of these with its raw 22P02/22021/22P05 (INTERNAL), and SQLite
 * wrote them.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { Budget, RunStore, TaskManager } from '../../src/engine/index.js';
import { portsOf } from '../stores.js';
import { codeOf, freshManager, operator } from '../helpers.js';

const BUDGET: Budget = { maxSteps: 20, maxFailures: 3, maxWriteCalls: null, maxPending: null, deadlineAt: null, maxTokens: null, maxCost: null };
const HUGE = 2 ** 63; // past a bigint; and not a safe integer

async function openRun(tm: TaskManager, runs: RunStore) {
  await tm.createTask({ title: 'run me', card: { goal: 'g' } }, operator);
  const claimed = (await runs.claimRun({ agent: 'w' }, () => BUDGET))!;
  const fence = { taskId: claimed.task.id, claimToken: claimed.task.claimToken, agent: 'w' };
  return { fence, run: claimed.opened.run, usage: claimed.opened.run.usage };
}

/** Every refusal below must leave the log as it was. */
async function unchanged(tm: TaskManager, attempts: Array<() => Promise<unknown>>): Promise<string[]> {
  const before = await tm.store.lastEventId();
  const codes: string[] = [];
  for (const attempt of attempts) codes.push(await codeOf(attempt()));
  expect(await tm.store.lastEventId()).toBe(before);
  return codes;
}

describe('the run port checks what it is given', () => {
  it('refuses ids that are not positive safe integers, on reads and writes, as VALIDATION_FAILED', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { runs } = portsOf(tm);
    const { fence, run } = await openRun(tm, runs);
    for (const bad of [HUGE, 1.5, -1, 0, Number.NaN]) {
      const codes = await unchanged(tm, [
        () => runs.getRun(bad),
        () => runs.getScreen(bad),
        () => runs.runsOf(bad),
        () => runs.getControl(bad),
        () => runs.getApproval(bad),
        () => runs.approvalForStep(bad),
        () => runs.decideApproval({ approvalId: bad, approve: true, actor: operator }),
        () => runs.resumeRun({ taskId: bad, actor: operator }),
        () => runs.setControl({ target: [bad], state: 'stopped', actor: operator }),
        () => runs.beginStep(fence, { runId: bad, kind: 'action', tool: 'echo', args: {} }),
        () => runs.finishStep(fence, { stepId: bad, status: 'ok', durationMs: 1, usage: run.usage }),
        () => runs.beginStep({ ...fence, taskId: bad }, { runId: run.id, kind: 'action', tool: 'echo', args: {} }),
      ]);
      expect(codes.every((c) => c === 'VALIDATION_FAILED'), `${bad}: ${codes.join(' ')}`).toBe(true);
    }
    const pages = await unchanged(tm, [() => runs.listApprovals('pending', 1.5), () => runs.listApprovals('pending', 0), () => runs.compact(HUGE), () => runs.compact(0.5)]);
    expect(pages).toEqual(['VALIDATION_FAILED', 'VALIDATION_FAILED', 'VALIDATION_FAILED', 'VALIDATION_FAILED']);
    expect((await runs.getRun(run.id)).id).toBe(run.id); // the good id still reads
    expect(await runs.compact(-86_400_000)).toBe(0); // before 1970: a retention longer than the clock's age compacts nothing
  });

  it('refuses NUL and lone surrogates in what a step stores, and reasons that are not one line', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { runs } = portsOf(tm);
    const { fence, run, usage } = await openRun(tm, runs);
    const step = await runs.beginStep(fence, { runId: run.id, kind: 'action', tool: 'echo', args: { text: 'a\u0000b' } });
    const codes = await unchanged(tm, [
      () => runs.beginStep(fence, { runId: run.id, kind: 'action', tool: 'ec\u0000ho', args: {} }),
      () => runs.beginStep(fence, { runId: run.id, kind: 'action', tool: 'echo', args: {}, idempotencyKey: 'k\ud800' }),
      () => runs.finishStep(fence, { stepId: step.id, status: 'failed', error: 'bad key "\u0000"', durationMs: 1, usage }),
      () => runs.writeSteps(fence, [{ record: { runId: run.id, kind: 'decide', status: 'failed', error: '\udc00', durationMs: 0, startedAt: Date.now(), usage } }]),
      () => runs.releaseRun(fence, run.id, 'line one\nby operator operator'),
      () => runs.setPaused(fence, run.id, true, 'pause\u001b[2J'),
      () => runs.recordRestart(fence, run.id, 'weak\u0085answer'),
      () => runs.finishRun(fence, { runId: run.id, phase: 'failed', stopReason: 'x\ny', envelope: {} as never, usage, moves: [] }),
      () => runs.finishRun(fence, { runId: run.id, phase: 'failed', stopReason: 'tool_error', envelope: {} as never, usage, moves: [{ to: 'failed', by: 'system', systemActor: 'control', reason: 'a\u0000' }] as never }),
      () => runs.parkRun(fence, { runId: run.id, stopReason: '', envelope: {} as never, usage }),
      () => runs.finishRun(fence, { runId: run.id, phase: 'running' as never, stopReason: 'tool_error', envelope: {} as never, usage, moves: [] }),
      () => runs.breakerRecord('to\u0000ol', false, { threshold: 3, cooldownMs: 1000, probeTimeoutMs: 1000 }, fence.taskId),
      () => runs.parkForApproval(fence, { runId: run.id, stepId: step.id, tool: 'x\ud800', args: {}, fingerprint: 'f', expiresAt: null }, usage),
      // Numbers PostgreSQL keeps as bigints and SQLite stored as given: refused on both.
      () => runs.finishStep(fence, { stepId: step.id, status: 'ok', durationMs: 1, tokens: 0.5, usage }),
      () => runs.finishStep(fence, { stepId: step.id, status: 'ok', durationMs: 1, usage: { ...usage, tokens: 1e20 } }),
      () => runs.finishStep(fence, { stepId: step.id, status: 'done' as never, durationMs: 1, usage }),
      () => runs.finishStep(fence, { stepId: step.id, status: 'ok', durationMs: -1, usage }),
      () => runs.beginStep(fence, { runId: run.id, kind: 'think' as never, tool: 'echo', args: {} }),
      () => runs.parkForApproval(fence, { runId: run.id, stepId: step.id, tool: 'echo', args: {}, fingerprint: 'f', expiresAt: 8.64e27 }, usage),
      () => runs.runStats(1e300),
      // A control's state and actor, an approval's and a resume's actor.
      () => runs.setControl({ target: [fence.taskId], state: 'bogus' as never, actor: operator }),
      () => runs.setControl({ target: [fence.taskId], state: 'stopped', actor: { id: 'x', role: 'root' } as never }),
      () => runs.decideApproval({ approvalId: 1, approve: true, actor: { id: '', role: 'operator' } }),
      () => runs.resumeRun({ taskId: fence.taskId, actor: { id: 'a\nb', role: 'operator' } }),
    ]);
    expect(codes).toEqual(Array(codes.length).fill('VALIDATION_FAILED'));
    // The step's arguments are JSON, where a NUL is an escape: stored and read back as written.
    expect((await runs.getRun(run.id)).steps.find((s) => s.id === step.id)?.args).toEqual({ text: 'a\u0000b' });
    // And the run goes on: the same calls with good text are written.
    // A fractional duration is the loop's own (performance.now): the adapters round it.
    await runs.finishStep(fence, { stepId: step.id, status: 'failed', error: 'bad key "\\u0000"', durationMs: 1.25, usage });
    await runs.releaseRun(fence, run.id, 'shutting down');
    expect((await tm.getTask(fence.taskId)).state).toBe('pending');
  });
});

describe('the schedule port checks what it is given', () => {
  it('refuses a cron it cannot read, a title with controls, a bad queue, catch-up or overlap, and ids past a bigint', async () => {
    const tm = freshManager();
    onTestFinished(() => tm.close());
    const { schedules } = portsOf(tm);
    const good = { cron: '* * * * *', title: 'tick', card: { goal: 'g' } };
    const codes = await unchanged(tm, [
      () => schedules.addSchedule({ ...good, cron: 'every day' }, operator),
      () => schedules.addSchedule({ ...good, cron: '* * * * *\u0000' }, operator),
      () => schedules.addSchedule({ ...good, cron: `* * * * * ${'1,'.repeat(200)}1` }, operator),
      () => schedules.addSchedule({ ...good, title: 'tick\u001b]0;pwned\u0007' }, operator),
      () => schedules.addSchedule({ ...good, title: 'line\nforged' }, operator),
      () => schedules.addSchedule({ ...good, title: 'a\u0000' }, operator),
      () => schedules.addSchedule({ ...good, title: '   ' }, operator),
      () => schedules.addSchedule({ ...good, queue: 'q q' }, operator),
      () => schedules.addSchedule({ ...good, catchUp: 'many' as never }, operator),
      () => schedules.addSchedule({ ...good, overlap: 'no' as never }, operator),
      () => schedules.addSchedule({ ...good, card: [] as never }, operator),
      () => schedules.addSchedule({ ...good, extra: 1 } as never, operator),
      () => schedules.removeSchedule(HUGE, operator),
      () => schedules.removeSchedule(1.5, operator),
    ]);
    expect(codes).toEqual(Array(codes.length).fill('VALIDATION_FAILED'));
    expect(await schedules.listSchedules()).toEqual([]);
    const s = await schedules.addSchedule({ ...good, title: '  tick  ' }, operator);
    expect(s.title).toBe('tick'); // trimmed, as a task's title is
  });
});
