/** Running one tool call: its own timeout, the run's AbortSignal, and the output cap. */
import { type BreakerPolicy, type ErrorCode, type RunStore, depthMessage, isEngineError, nestsDeeper } from '../engine/index.js';
import { deadline } from '../tools/deadline.js';
import type { Tool, ToolContext } from '../tools/registry.js';

/**
 * `errorType`: a stable name for what went wrong (a trace's `error.type`; the `error` text may
 * quote arguments). `notCalled`: the run was stopped before the call, so the tool was never
 * called: known not to have taken effect (not an unknown write).
 */
export type ExecOutcome =
  | { ok: true; result: unknown; durationMs: number; /** The result's size as JSON (UTF-8), when the call measured it. */ bytes?: number }
  | { ok: false; error: string; durationMs: number; aborted: boolean; errorType?: string; notCalled?: true };

/**
 * `cutAfterMs`: a limit below the tool's own timeout (a read cut at its run's deadline); a call
 * it cuts fails with errorType `deadline`.
 */
export async function executeTool(tool: Tool, args: Record<string, unknown>, ctx: Omit<ToolContext, 'signal'>, runSignal: AbortSignal, cutAfterMs?: number): Promise<ExecOutcome> {
  // A stopped run calls nothing, even a call its gate admitted and its step began: the tool
  // would start with its signal already fired, and a write would land after the stop.
  if (runSignal.aborted) {
    return { ok: false, error: `${tool.name}: not called: the run was stopped (${String(runSignal.reason)})`, durationMs: 0, aborted: true, errorType: 'not_called', notCalled: true };
  }
  const started = performance.now();
  const cut = cutAfterMs !== undefined && cutAfterMs < tool.timeoutMs ? Math.max(0, cutAfterMs) : undefined;
  const limit = deadline(runSignal, cut ?? tool.timeoutMs);
  const { signal } = limit;
  const elapsed = () => performance.now() - started;
  let onAbort: (() => void) | undefined;
  // A tool that ignores its signal still loses the race: the loop moves on.
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const result = await Promise.race([tool.execute(args, { ...ctx, signal }), aborted]);
    // A result is stored, summarised and fingerprinted by recursive code: too deep fails the call.
    // A write's call did its work whatever its output: it succeeded, its output is dropped
    // (failed, the planner would do it again, and it would be missing from side_effects).
    const refused = (error: string, errorType: string): ExecOutcome =>
      tool.kind === 'write' ? { ok: true, result: { output_dropped: error }, durationMs: elapsed() } : { ok: false, error, durationMs: elapsed(), aborted: false, errorType };
    if (nestsDeeper(result)) return refused(`${tool.name}: its output ${depthMessage()}`, 'output_too_deep');
    let text: string;
    try {
      text = JSON.stringify(result ?? null);
    } catch (err) {
      // A BigInt, a toJSON that throws: the call returned, its output cannot be kept.
      return refused(`${tool.name}: its output cannot be written as JSON (${err instanceof Error ? err.message : String(err)})`, 'output_unserializable');
    }
    const size = Buffer.byteLength(text, 'utf8');
    if (size > tool.maxOutputBytes) return refused(`${tool.name}: output of ${size} bytes exceeds the cap of ${tool.maxOutputBytes}`, 'output_too_large');
    return { ok: true, result: result ?? null, durationMs: elapsed(), bytes: size };
  } catch (err) {
    if (limit.timedOut() && !runSignal.aborted && cut !== undefined) {
      return { ok: false, error: `${tool.name}: cut off at the run's deadline after ${Math.round(elapsed())} ms`, durationMs: elapsed(), aborted: false, errorType: 'deadline' };
    }
    if (limit.timedOut() && !runSignal.aborted) {
      return { ok: false, error: `${tool.name}: timed out after ${tool.timeoutMs} ms`, durationMs: elapsed(), aborted: false, errorType: 'timeout' };
    }
    if (runSignal.aborted) return { ok: false, error: `${tool.name}: aborted (${String(runSignal.reason)})`, durationMs: elapsed(), aborted: true, errorType: 'aborted' };
    const message = err instanceof Error ? err.message : String(err);
    // An engine refusal keeps its stable code in the step's error (e.g. DESKTOP_UNAVAILABLE).
    const code = isEngineError(err) ? `${err.code}: ` : '';
    return { ok: false, error: `${tool.name}: ${code}${message.split('\n')[0]}`, durationMs: elapsed(), aborted: false, errorType: isEngineError(err) ? err.code : 'tool_error' };
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    limit.release();
    aborted.catch(() => undefined);
  }
}

/** A read cut off at its run's deadline (executeTool's `cutAfterMs`): the budget ends the run; no failure of the tool's or the run's. */
export const cutAtDeadline = (out: ExecOutcome): boolean => !out.ok && out.errorType === 'deadline';

/**
 * Failures that say nothing about a tool's health: the call was cut off by a stop (`aborted`)
 * or its run's deadline, never made (its arguments failed their schema), or refused for what
 * the caller asked (an id that names nothing, a value out of range, a move it may not make, an
 * output too big or deep for what it asked). The tool's breaker is shared by every run on the database, so an agent that could
 * count these could switch a tool off for everyone by asking for things that do not exist.
 * A tool says "your arguments" by throwing an EngineError with one of these codes.
 */
const CALLERS_OWN: ReadonlySet<string> = new Set<ErrorCode | string>([
  'invalid_args', 'output_too_large', 'output_too_deep', 'deadline',
  'VALIDATION_FAILED', 'TASK_NOT_FOUND', 'RUN_NOT_FOUND', 'APPROVAL_NOT_FOUND', 'FORBIDDEN',
  'INVALID_TRANSITION', 'STALE_CLAIM', 'DEPENDENCY_CYCLE', 'RESERVED_NAME',
]);

/** What a call tells its tool's breaker: ok, a failure, or nothing (the caller's own fault; see CALLERS_OWN). */
export function breakerOutcome(out: ExecOutcome): boolean | undefined {
  if (out.ok) return true;
  if (out.aborted || CALLERS_OWN.has(out.errorType ?? 'tool_error')) return undefined;
  return false;
}

/** Records a call's outcome on its tool's breaker, unless it says nothing of the tool (breakerOutcome). */
export async function recordOnBreaker(runs: Pick<RunStore, 'breakerRecord'>, tool: string, out: ExecOutcome, policy: BreakerPolicy, taskId: number): Promise<void> {
  const ok = breakerOutcome(out);
  if (ok !== undefined) await runs.breakerRecord(tool, ok, policy, taskId);
}
