/**
 * Fewer writes per step, same guarantees. A run's journal holds back the step writes that
 * are safe to lose in a crash and folds them into the run's next write transaction:
 *
 * | step                                   | write transactions                                  |
 * |----------------------------------------|-----------------------------------------------------|
 * | claim + open (or resume) the run       | 1 (RunStore.claimRun)                                |
 * | decide                                 | 0 of its own: recorded with the next write           |
 * | observe, read action                   | 1: its begin (with what was held back); the outcome is held back |
 * | write action                           | 2: its intent (with what was held back), its outcome |
 * | refused call                           | 0 of its own: recorded with the next write           |
 * | the run's ending and its task's moves  | 1 (with what was held back)                          |
 *
 * So a run of read calls makes one write per loop iteration (the read's begin carries the
 * previous read's outcome and the decision), and a one-tool card makes three in all.
 * What a crash can lose is only what is safe to do again: a decision not yet written is
 * taken again (loop-state.ts: a resumed run re-decides from its last written step), a read
 * whose outcome was not written is made again (loop-resume.ts). A write's intent is
 * committed before it runs and its outcome right after, as before: a crash never repeats
 * an unknown write. Every other write of the run (pause, park, release, restart, approval)
 * first writes what is held back, in its own transaction.
 *
 * Held-back writes are never kept long: when nothing else writes within FLUSH_MS (the
 * planner is a model thinking for seconds), they are written on their own, so operators and
 * streams see a finished step as soon as it finished. All of a run's writes go through one
 * queue, in order; a failure of a held-back write surfaces at the run's next write.
 */
import type { Fence, FinishStepInput, RecordStepInput, RunStore, Step, StepWrite } from '../engine/index.js';

/** How long a held-back write may wait for the run's next write. */
export const FLUSH_MS = 20;

export interface Journal {
  /** The run store as the loop uses it: held-back writes folded into, or flushed before, each write. */
  readonly runs: RunStore;
  /** Holds back a step that completed (a decision, a refused call); returns it as it will be written. */
  record(input: RecordStepInput, seq: number): Step;
  /** Holds back the outcome of a read step begun earlier; returns the step as it will be written. */
  finishLater(started: Step, input: FinishStepInput): Step;
  /** Writes what is held back now. */
  flush(): Promise<void>;
  /** Writes what is held back and stops the timer (the run is over, whichever way). */
  close(): Promise<void>;
}

/**
 * The run's other writes, which write what is held back first. (Breakers are not among
 * them: a breaker's row is not the run's, a closed breaker costs no write at all, and the
 * gate asks it before every call.)
 */
const FLUSH_FIRST = [
  'setPaused', 'parkRun', 'releaseRun', 'recordRestart', 'parkForApproval', 'reparkForApproval', 'useApproval',
] as const satisfies ReadonlyArray<keyof RunStore>;

export function createJournal(store: RunStore, fence: Fence): Journal {
  let held: StepWrite[] = [];
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let failure: unknown;

  const take = (): StepWrite[] | undefined => {
    clearTimeout(timer);
    timer = undefined;
    if (held.length === 0) return undefined;
    const taken = held;
    held = [];
    return taken;
  };
  /** Runs the run's writes one at a time, in order. */
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const next = chain.then(() => {
      if (failure !== undefined) throw failure;
      return fn();
    });
    chain = next.catch(() => undefined);
    return next;
  };
  const flush = (): Promise<void> =>
    serial(async () => {
      const writes = take();
      if (writes !== undefined) await store.writeSteps(fence, writes);
    });
  const hold = (write: StepWrite): void => {
    held.push(write);
    timer ??= setTimeout(() => {
      timer = undefined;
      flush().catch((err: unknown) => (failure ??= err));
    }, FLUSH_MS);
  };

  const runs: RunStore = {
    ...store,
    beginStep: (f, input) => serial(() => store.beginStep(f, { ...input, before: take() })),
    finishStep: (f, input) => serial(() => store.finishStep(f, { ...input, before: take() })),
    finishRun: (f, input) => serial(() => store.finishRun(f, { ...input, before: take() })),
  };
  for (const name of FLUSH_FIRST) {
    const original = store[name] as (...args: unknown[]) => Promise<unknown>;
    (runs as unknown as Record<string, unknown>)[name] = (...args: unknown[]) =>
      serial(async () => {
        const writes = take();
        if (writes !== undefined) await store.writeSteps(fence, writes);
        return original(...args);
      });
  }

  return {
    runs,
    record(input, seq) {
      hold({ record: input });
      return {
        id: 0,
        runId: input.runId,
        seq,
        kind: input.kind,
        status: input.status,
        tool: input.tool ?? null,
        args: input.args ?? null,
        result: input.result ?? null,
        error: input.error ?? null,
        durationMs: Math.round(input.durationMs),
        tokens: input.tokens ?? 0,
        idempotencyKey: null,
        startedAt: input.startedAt,
        finishedAt: Date.now(),
      };
    },
    finishLater(started, input) {
      hold({ finish: input });
      return {
        ...started,
        status: input.status,
        result: input.result ?? null,
        error: input.error ?? null,
        durationMs: Math.round(input.durationMs),
        tokens: input.tokens ?? 0,
        finishedAt: Date.now(),
      };
    },
    flush,
    async close() {
      try {
        await flush();
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
