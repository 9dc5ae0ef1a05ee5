/**
 * A write whose call ended without the tool saying how it went — its time limit passed, or
 * the run was stopped while it ran — may or may not have taken effect: a tool that ignores
 * its signal goes on in the background, and one that honours it may have been cut off after
 * its side effect. Recorded as a plain failure, the planner would try it again, and a
 * non-idempotent write would land twice. So, as for a write a crash interrupted:
 *
 * - a non-idempotent write is recorded `unknown`; after a timeout the run waits for a person,
 *   who says whether it happened (`taskloop task resume N --side-effect happened|not-happened`);
 *   after a stop the run is cancelled, with the write named in its envelope;
 * - an idempotent write is recorded failed, its result `{ outcome: 'unknown' }`, and the run
 *   keeps its idempotency key for that exact call (this task, this tool, these canonical
 *   arguments): if the planner makes the same call again, it is carried out under the same
 *   key, so it takes effect at most once. Only that call's success forgets the key (and
 *   settles the earlier attempts in side_effects): a retry that fails (a 429 before the
 *   service looked at the key) says nothing about the first attempt. The price: a deliberate
 *   repeat of the same call later in the run, before one attempt succeeded, is answered by
 *   the tool as a replay of the first.
 *
 * Both are listed in the envelope's side_effects as `unknown`. A tool that cannot tell
 * either (its connection dropped mid-call) throws an EngineError `TOOL_OUTCOME_UNKNOWN`, and
 * is treated as a timed-out one. Any other failure the tool reported (it threw) is a plain
 * failure; a write whose output was too big, too deep or not JSON took effect, and is
 * recorded ok without its output (execute.ts).
 */
import { type Step, UNSURE_RESULT } from '../engine/index.js';
import type { Tool } from '../tools/registry.js';
import type { ExecOutcome } from './execute.js';
import { fingerprint } from './loop-context.js';

export { UNSURE_RESULT };

/** Whether a settled step is an idempotent write whose outcome is unknown (its key is kept). */
export const isUnsure = (step: Pick<Step, 'status' | 'result'>): boolean =>
  step.status === 'failed' && (step.result as { outcome?: unknown } | null)?.outcome === 'unknown';

/** What a finished call of `tool` means for its write: `unknown` (a person decides), `retry_same_key`, or nothing unusual. */
export function unsureWrite(tool: Tool, out: ExecOutcome): 'unknown' | 'retry_same_key' | undefined {
  if (tool.kind !== 'write' || out.ok || out.notCalled === true || !(out.aborted || out.errorType === 'timeout' || out.errorType === 'TOOL_OUTCOME_UNKNOWN')) return undefined;
  return tool.idempotent ? 'retry_same_key' : 'unknown';
}

/** The error an `unknown` write step records. */
export const unknownError = (error: string) => `${error}; the write may or may not have taken effect`;

/** How a failed call is settled: its error, and for an idempotent write of unknown outcome the result that keeps its key (the planner reads both). */
export function failedSettle(tool: Tool, out: Extract<ExecOutcome, { ok: false }>): { error: string; result?: typeof UNSURE_RESULT } {
  if (unsureWrite(tool, out) !== 'retry_same_key') return { error: out.error };
  return { error: `${out.error}; its outcome is unknown: calling it again with the same arguments repeats it under the same idempotency key`, result: UNSURE_RESULT };
}

/** The calls whose key is kept: call fingerprint → idempotency key. */
export type UnsureKeys = Map<string, string>;

/** The key of `tool(args)` if an earlier attempt of that exact call has an unknown outcome. */
export function keyFor(keys: UnsureKeys, taskId: number, tool: string, args: unknown): string | undefined {
  // (No digest of the arguments on every call while no key is kept: the usual case.)
  return keys.size === 0 ? undefined : keys.get(fingerprint(taskId, tool, args));
}

/** Keeps the key of an unsure call, or forgets it once that call succeeded. */
export function noteSettled(keys: UnsureKeys, taskId: number, step: Step): void {
  if (step.kind !== 'action' || step.tool === null || step.idempotencyKey === null) return;
  if (isUnsure(step)) keys.set(fingerprint(taskId, step.tool, step.args), step.idempotencyKey);
  else if (step.status === 'ok' && keys.size > 0) keys.delete(fingerprint(taskId, step.tool, step.args));
}
