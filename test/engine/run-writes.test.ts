/**
 * What a run write returns is what a read of it gives, on both stores. The SQLite writes
 * build the rows they return in JS instead of reading them back (RETURNING costs an
 * ephemeral table per insert), and a finished run's `{ run, task }` is built on first read:
 * a value that drifted from what was stored (a rounded duration, a default column, a JSON
 * round trip) would show here.
 */
import { describe, expect, it } from 'vitest';
import type { Budget, Envelope, Step, Usage } from '../../src/engine/index.js';
import { ZERO_USAGE } from '../../src/engine/run-rows.js';
import { portsOf } from '../stores.js';
import { freshManager, operator } from '../helpers.js';

const BUDGET: Budget = { maxSteps: 20, maxFailures: 3, maxWriteCalls: 4, maxPending: null, deadlineAt: null, maxTokens: 1000, maxCost: 2.5 };
const used = (steps: number, tokens = 0): Usage => ({ ...ZERO_USAGE, steps, tokens });
const withoutReads = <T extends { steps?: unknown; screen?: unknown }>(run: T) => {
  const { steps: _steps, screen: _screen, ...rest } = run;
  return rest;
};

describe('run writes return what is stored', () => {
  it('a new run, begun, recorded and finished steps, and the ended run with its task equal their reads', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    await tm.createTask({ title: 'returns', card: { goal: 'g' } }, operator);
    const claimed = (await runs.claimRun({ agent: 'w' }, () => BUDGET))!;
    const fence = { taskId: claimed.task.id, claimToken: claimed.task.claimToken, agent: 'w' };
    const runId = claimed.opened.run.id;
    expect(claimed.opened.run).toEqual(withoutReads(await runs.getRun(runId)));

    const stepOf = async (step: Step) => (await runs.getRun(runId)).steps.find((s) => s.id === step.id);
    const begun = await runs.beginStep(fence, { runId, kind: 'action', tool: 'click', args: { x: 1, nested: { y: [1, 'two'] } }, idempotencyKey: 'k-1' });
    expect(begun).toEqual(await stepOf(begun));
    const at = Date.now() - 5;
    const written = await runs.writeSteps(fence, [
      { finish: { stepId: begun.id, status: 'ok', result: { clicked: true }, durationMs: 3.6, tokens: 7, usage: used(1, 7) } },
      { record: { runId, kind: 'decide', status: 'ok', durationMs: 1.4, tokens: 12, startedAt: at, usage: used(2, 19) } },
      { record: { runId, kind: 'action', status: 'failed', tool: 'read_file', args: { path: 'a' }, error: 'no such file', durationMs: 0.5, startedAt: at, idempotencyKey: 'k-2', usage: used(3, 19) } },
    ]);
    expect(written.map((s) => s.seq)).toEqual([1, 2, 3]);
    for (const step of written) expect(step).toEqual(await stepOf(step));

    const envelope: Envelope = {
      run_id: runId,
      task_id: fence.taskId,
      phase: 'completed',
      stop_reason: 'goal_met',
      goal_progress: { completed: ['a'], pending: [] },
      side_effects: [],
      evidence: ['seen'],
      acceptance: null,
      trace: { used_tools: ['click'], rejected_calls: [], pending_ids: [], step_count: 4 },
      safe_resume: { condition: 'after step 4', checkpoint_version: 4 },
    };
    const ended = await runs.finishRun(fence, {
      runId,
      phase: 'completed',
      stopReason: 'goal_met',
      envelope,
      usage: used(4, 25),
      moves: [{ to: 'review', by: 'assignee', reason: 'done' }, { to: 'completed', by: 'system', systemActor: 'acceptance', reason: 'accepted' }],
      result: { answer: 42 },
      before: [{ record: { runId, kind: 'decide', status: 'ok', durationMs: 2, tokens: 6, startedAt: at, usage: used(4, 25) } }],
    });
    const read = await runs.getRun(runId);
    expect(read).toMatchObject({ phase: 'completed', checkpointVersion: 4, usage: used(4, 25) });
    expect(ended.run).toEqual(withoutReads(read));
    const { events: _events, ...task } = await tm.getTask(fence.taskId);
    expect(ended.task).toEqual(task);
    expect(ended.task).toMatchObject({ state: 'completed', result: { answer: 42 } });
  });
});
