/**
 * What createWorker writes when a handler ends, every write fenced by the claim token (a
 * worker that lost its claim gets STALE_CLAIM, and nothing lands):
 * - a returned value, as JSON, moves the task in_progress → review (→ completed unless the
 *   worker finishes at review) with the value as its result, in one transaction;
 * - a throw, a value with no JSON form, or a result the engine refuses (too large) requeues
 *   the task while attempts remain, else fails it; the reason is the error's first line;
 * - a store fault (a full disk) lets the slot's lease go, so the sweep gives the task back.
 */
import { type ClaimedTask, type RunStore, type TaskManager, asAgent, describeError, isEngineError, systemActor } from '../engine/index.js';
import { clip, printable } from '../engine/text.js';

/** How a handler ended. */
export type HandlerOutcome = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface OutcomeWriter {
  /** Ends a handler's task as its outcome says (see the module comment); never throws. */
  settle(task: ClaimedTask, slotId: string, outcome: HandlerOutcome): Promise<void>;
  /** Gives a held task back (pending), fenced; false when the claim was already lost. */
  giveBack(task: ClaimedTask, reason: string): Promise<boolean>;
}

export interface OutcomeWriterOptions {
  tm: TaskManager;
  runs: RunStore;
  agent: string;
  finish: 'completed' | 'review';
  log: (line: string) => void;
}

/**
 * A failure reason keeps the error's first line, clipped (reasons are at most 2000
 * characters) and with any control character in it escaped (a reason may hold none).
 */
const REASON_CHARS = 500;

const firstLine = (text: string): string => clip(printable(text.split('\n')[0] ?? ''), REASON_CHARS);

/** The handler's value as the JSON that will be stored, or why it cannot be. */
function asJson(value: unknown): { ok: true; json: unknown } | { ok: false; why: string } {
  if (value === undefined) return { ok: true, json: null };
  try {
    const text = JSON.stringify(value);
    return text === undefined ? { ok: false, why: 'the handler returned a value with no JSON form' } : { ok: true, json: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, why: `the handler's result is not JSON: ${describeError(err)}` };
  }
}

type MoveInput = Omit<Parameters<TaskManager['transitionTask']>[0], 'taskId' | 'claimToken'>;

export function createOutcomeWriter(opts: OutcomeWriterOptions): OutcomeWriter {
  const { tm, runs, log } = opts;
  const me = asAgent(opts.agent);

  /** A fenced move of a held task; a lost claim is logged, never thrown. */
  const move = async (task: ClaimedTask, what: string, input: MoveInput): Promise<boolean> => {
    try {
      await tm.transitionTask({ ...input, taskId: task.id, claimToken: task.claimToken });
      return true;
    } catch (err) {
      if (isEngineError(err) && err.code === 'STALE_CLAIM') log(`task ${task.id}: claim lost before ${what} (STALE_CLAIM); nothing was written`);
      else log(`task ${task.id}: ${what} failed: ${describeError(err)}`);
      return false;
    }
  };
  const requeueOrFail = (task: ClaimedTask, why: string) =>
    task.attempts < task.maxAttempts
      ? move(task, 'requeue', { to: 'pending', actor: systemActor('daemon'), reason: `${firstLine(why)} (attempt ${task.attempts} of ${task.maxAttempts}; requeued)` })
      : move(task, 'failing it', { to: 'failed', actor: me, reason: `${firstLine(why)} (attempt ${task.attempts} of ${task.maxAttempts})` });

  const settle = async (task: ClaimedTask, slotId: string, outcome: HandlerOutcome): Promise<void> => {
    if (!outcome.ok) {
      await requeueOrFail(task, `handler failed: ${describeError(outcome.error)}`);
      return;
    }
    const result = asJson(outcome.value);
    if (!result.ok) {
      await requeueOrFail(task, result.why);
      return;
    }
    const then = opts.finish === 'completed' ? [{ to: 'completed' as const, actor: systemActor('acceptance'), reason: 'the handler returned' }] : undefined;
    try {
      await tm.transitionTask({ taskId: task.id, claimToken: task.claimToken, to: 'review', actor: me, result: result.json, ...(then === undefined ? {} : { then }) });
    } catch (err) {
      if (isEngineError(err) && err.code === 'STALE_CLAIM') log(`task ${task.id}: claim lost before its result was written (STALE_CLAIM); the result is dropped`);
      else if (isEngineError(err) && err.code === 'VALIDATION_FAILED') await requeueOrFail(task, `the handler's result was refused: ${err.message}`);
      else {
        // A store fault (a full disk): let the lease go, so the sweep gives the task back.
        log(`task ${task.id}: writing its result failed: ${describeError(err)}; its lease is let go`);
        await runs.expireSlot(slotId).catch(() => undefined);
      }
    }
  };

  return {
    settle,
    giveBack: (task, reason) => move(task, 'giving it back', { to: 'pending', actor: systemActor('daemon'), reason }),
  };
}
