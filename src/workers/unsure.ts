/**
 * A write whose call ended without the tool saying how it went — its time limit passed, or
 * the run was stopped while it ran — may or may not have taken effect: a tool that ignores
 * its signal goes on in the background, and one that honours it may have been cut off after
 * its side effect. Recorded as a plain failure, the planner would try it again, and a
 * non-idempotent write would land twice. So, as for a write a crash interrupted:
 *
 * - a non-idempotent write is recorded `unknown` and the run waits for a person, who says
 *   whether it happened (`taskloop task resume N --side-effect happened|not-happened`);
 * - an idempotent write is recorded failed, and the run keeps its idempotency key for that
 *   exact call (this task, this tool, these canonical arguments): if the planner makes the
 *   same call again, it is carried out under the same key, so it takes effect at most once.
 *   A definite answer for that call (ok, or a failure the tool reported) forgets the key.
 *
 * A failure the tool reported itself (it threw, its output was too big) is a plain failure.
 */
import type { Step } from '../engine/index.js';
import type { Tool } from '../tools/registry.js';
import type { ExecOutcome } from './execute.js';
import { fingerprint } from './loop-context.js';

/** Marks the error of an idempotent write whose outcome is unknown (read back when a run is rebuilt). */
export const UNSURE_MARK = 'its outcome is unknown';

/** What a finished call of `tool` means for its write: `unknown` (a person decides), `retry_same_key`, or nothing unusual. */
export function unsureWrite(tool: Tool, out: ExecOutcome): 'unknown' | 'retry_same_key' | undefined {
  if (tool.kind !== 'write' || out.ok || !(out.aborted || out.errorType === 'timeout')) return undefined;
  return tool.idempotent ? 'retry_same_key' : 'unknown';
}

/** The error an `unknown` write step records. */
export const unknownError = (error: string) => `${error}; the write may or may not have taken effect`;

/** The error an idempotent write of unknown outcome records (the planner reads it). */
export const retryError = (error: string) => `${error}; ${UNSURE_MARK}: calling it again with the same arguments repeats it under the same idempotency key`;

/** The calls whose key is kept: call fingerprint → idempotency key. */
export type UnsureKeys = Map<string, string>;

/** The key of `tool(args)` if an earlier attempt of that exact call has an unknown outcome. */
export function keyFor(keys: UnsureKeys, taskId: number, tool: string, args: unknown): string | undefined {
  return keys.get(fingerprint(taskId, tool, args));
}

/** Keeps or forgets the key of the call a settled step made. */
export function noteSettled(keys: UnsureKeys, taskId: number, step: Step): void {
  if (step.kind !== 'action' || step.tool === null || step.idempotencyKey === null) return;
  const fp = fingerprint(taskId, step.tool, step.args);
  if (step.status === 'failed' && step.error?.includes(UNSURE_MARK) === true) keys.set(fp, step.idempotencyKey);
  else if (step.status === 'ok' || step.status === 'failed') keys.delete(fp);
}
