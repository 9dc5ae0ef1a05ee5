/**
 * One time-boxed hook call (STYLE 9). The call gets a signal of its own that fires when its
 * time limit passes or when the run's signal aborts, and the caller stops waiting at the
 * time limit whether or not the hook honours that signal: a hook that never settles cannot
 * hold a run. What a hook does after it was cut is never seen — its late value is dropped.
 *
 * An AbortController with an explicit listener removal, rather than `AbortSignal.any`: the
 * run's signal lives as long as the run, and every hook call must leave nothing attached to
 * it once the call is over.
 */

/** How one hook call ended. `timedOut` and `aborted` tell a cut call from one that threw. */
export type Boxed<T> =
  | { ok: true; value: T }
  | { ok: false; error: unknown; timedOut: boolean; aborted: boolean };

export interface TimeboxOptions {
  /** The time limit, in milliseconds. */
  ms: number;
  /** The run's signal: its abort fires the hook's signal too. */
  parent?: AbortSignal | undefined;
  /**
   * Whether the run's abort also ends the wait. Gates fail closed and stop at once;
   * observers are still waited for (up to `ms`), so a stopped run's `tool_after` and
   * `run_end` are still reported.
   */
  cutOnAbort: boolean;
}

/** The reason a hook's signal carries when its time limit passed (a `TimeoutError`, as `AbortSignal.timeout` gives). */
export function timeoutReason(ms: number): DOMException {
  return new DOMException(`timed out after ${ms} ms`, 'TimeoutError');
}

export async function timebox<T>(call: (signal: AbortSignal) => T | PromiseLike<T>, opts: TimeboxOptions): Promise<Boxed<T>> {
  const { ms, parent, cutOnAbort } = opts;
  const aborted = (): Boxed<T> => ({ ok: false, error: new Error('aborted'), timedOut: false, aborted: true });
  if (cutOnAbort && parent?.aborted === true) return aborted();
  const controller = new AbortController();
  let cut!: (outcome: Boxed<T>) => void;
  const cutShort = new Promise<Boxed<T>>((resolve) => (cut = resolve));
  const timer = setTimeout(() => {
    const reason = timeoutReason(ms);
    controller.abort(reason);
    cut({ ok: false, error: reason, timedOut: true, aborted: false });
  }, ms);
  const onAbort = () => {
    controller.abort(parent?.reason);
    if (cutOnAbort) cut(aborted());
  };
  if (parent?.aborted === true) onAbort();
  else parent?.addEventListener('abort', onAbort, { once: true });
  try {
    const settled = Promise.resolve()
      .then(() => call(controller.signal))
      .then(
        (value): Boxed<T> => ({ ok: true, value }),
        (error: unknown): Boxed<T> => ({ ok: false, error, timedOut: false, aborted: false }),
      );
    return await Promise.race([settled, cutShort]);
  } finally {
    clearTimeout(timer);
    parent?.removeEventListener('abort', onAbort);
  }
}

/** A failure's message for a report or a denial. */
export function describeFailure(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
