/**
 * Fewer writes per step, same guarantees. A run's journal holds back the step writes that
 * are safe to lose in a crash and folds them into the run's next write transaction:
 *
 * | step                                   | write transactions                                  |
 * |----------------------------------------|-----------------------------------------------------|
 * | claim + open (or resume) the run       | 1 (RunStore.claimRun)                                |
 * | decide                                 | 0 of its own: recorded with the next write           |
 * | observe, read action                   | 0 of its own: recorded whole once it completed, with the next write; begun on its own only if it is still running when the flush comes |
 * | write action                           | 2: its intent (with what was held back), its outcome |
 * | refused call                           | 0 of its own: recorded with the next write           |
 * | the run's ending and its task's moves  | 1 (with what was held back)                          |
 *
 * So a one-read card makes two write transactions in all (claim, ending), and a run of
 * reads writes one batch per FLUSH_MS, whatever the number of steps in it.
 * What a crash can lose is only what is safe to do again: a decision not yet written is
 * taken again (loop-state.ts: a resumed run re-decides from its last written step), a read
 * whose outcome was not written is made again (loop-resume.ts). A write's intent is
 * committed before it runs and its outcome right after, as before: a crash never repeats
 * an unknown write. Every other write of the run (pause, park, release, restart, approval)
 * first writes what is held back, in its own transaction.
 *
 * Held-back writes are never kept long: the oldest waits at most FLUSH_MS (and at most
 * MAX_HELD writes wait), then they are written on their own, so operators and streams see a
 * finished step soon after it finished, and a run whose claim was taken stops at that write
 * (STALE_CLAIM) instead of reading on. A read still running at the flush (a slow tool) gets
 * its `started` row then, so a long call shows as running. All of a run's writes go through
 * one queue, in order; a failure of a held-back write surfaces at the run's next step (the
 * next write, or the next step it would hold back).
 */
import type { BeginStepInput, Fence, FinishStepInput, RecordStepInput, RunStore, Step, StepWrite } from '../engine/index.js';

/** How long a held-back write may wait for the run's next write. */
export const FLUSH_MS = 20;
/** How many held-back writes one batch may hold (a loop of fast reads). */
export const MAX_HELD = 256;

export interface Journal {
  /** The run store as the loop uses it: held-back writes folded into, or flushed before, each write. */
  readonly runs: RunStore;
  /** Holds back a step that completed (a decision, a refused call); returns it as it will be written. */
  record(input: RecordStepInput, seq: number): Step;
  /** Holds back the begin of a read that is about to run; returns the step as begun (id 0 until written). */
  beginLater(input: BeginStepInput, seq: number): Step;
  /** Holds back the outcome of a read begun earlier (written or not); returns the step as it will be written. */
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

/** A read held back: begun at `input.startedAt`; `id` once its `started` row is written; `outcome` once it completed. */
interface HeldRead {
  input: BeginStepInput & { startedAt: number };
  seq: number;
  id?: number;
  outcome?: FinishStepInput;
}

/** What waits, in order: a plain step write, a read held back, or the outcome of a read whose begin was written. */
type Held = { write: StepWrite } | { read: HeldRead } | { settled: HeldRead };

export function createJournal(store: RunStore, fence: Fence): Journal {
  let held: Held[] = [];
  let since = 0;
  let timer: NodeJS.Timeout | undefined;
  let chain: Promise<unknown> = Promise.resolve();
  let failure: unknown;
  // Reads whose `started` row is in the batch being written: they learn their step id from it.
  let beginning: Array<{ read: HeldRead; at: number }> = [];
  // Reads begun through beginLater and not yet finished, by seq.
  const reading = new Map<number, HeldRead>();
  let flushQueued = false;

  /** What is held back, as step writes (always called inside `serial`: no write is in flight). */
  const take = (): StepWrite[] | undefined => {
    clearTimeout(timer);
    timer = undefined;
    if (held.length === 0) return undefined;
    const writes: StepWrite[] = [];
    beginning = [];
    const kept: Held[] = [];
    for (const h of held) {
      if ('write' in h) writes.push(h.write);
      else if ('settled' in h) writes.push({ finish: { ...h.settled.outcome!, stepId: h.settled.id! } });
      else if (h.read.outcome !== undefined) writes.push({ record: recordOf(h.read) });
      else {
        // Still running: its begin is written now, its outcome later.
        beginning.push({ read: h.read, at: writes.length });
        writes.push({ begin: h.read.input });
        kept.push(h);
      }
    }
    held = kept;
    return writes;
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
  /** Writes what is held back in a transaction of its own, and gives begun reads their ids. */
  const writeHeld = async (): Promise<void> => {
    flushQueued = false;
    const writes = take();
    if (writes === undefined) return;
    const steps = await store.writeSteps(fence, writes);
    const begun = beginning;
    beginning = [];
    if (begun.length === 0) return;
    for (const { read, at } of begun) read.id = steps[at]!.id;
    // A read whose outcome came while its begin was being written waits as a finish, in its
    // place: what was held after it (a later step, a later usage, a later screen) stays later.
    held = held.flatMap((h): Held[] => ('read' in h && h.read.id !== undefined ? (h.read.outcome === undefined ? [] : [{ settled: h.read }]) : [h]));
    if (held.length > 0) {
      since = Date.now();
      arm();
    }
  };
  /** Held-back writes to fold into the next write, or none (a read still running is begun on its own first). */
  const folded = async (): Promise<StepWrite[] | undefined> => {
    if (held.some((h) => 'read' in h && h.read.outcome === undefined)) {
      await writeHeld();
      return undefined;
    }
    return take();
  };
  const flush = (): Promise<void> => serial(writeHeld);
  const flushSoon = (): void => {
    if (flushQueued) return;
    flushQueued = true;
    flush().catch((err: unknown) => (failure ??= err));
  };
  function hold(h: Held): void {
    // A held-back write that failed (a claim taken away: STALE_CLAIM) ends the run at its
    // next step, not at its next write: a run of reads makes no write of its own.
    if (failure !== undefined) throw failure;
    if (held.length === 0) since = Date.now();
    held.push(h);
    // A run that never waits on a timer (a loop of fast reads) is flushed by age and size here.
    if (held.length >= MAX_HELD || Date.now() - since >= FLUSH_MS) return flushSoon();
    arm();
  }
  function arm(): void {
    timer ??= setTimeout(() => {
      timer = undefined;
      flushSoon();
    }, FLUSH_MS);
  }

  const runs: RunStore = {
    ...store,
    // What was held back goes first, then what the caller asked to be written before (one transaction).
    beginStep: (f, input) => serial(async () => store.beginStep(f, { ...input, before: joined(await folded(), input.before) })),
    finishStep: (f, input) => serial(async () => store.finishStep(f, { ...input, before: joined(await folded(), input.before) })),
    finishRun: (f, input) => serial(async () => store.finishRun(f, { ...input, before: await folded() })),
  };
  for (const name of FLUSH_FIRST) {
    const original = store[name] as (...args: unknown[]) => Promise<unknown>;
    (runs as unknown as Record<string, unknown>)[name] = (...args: unknown[]) =>
      serial(async () => {
        await writeHeld();
        return original(...args);
      });
  }

  return {
    runs,
    record(input, seq) {
      hold({ write: { record: input } });
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
        idempotencyKey: input.idempotencyKey ?? null,
        startedAt: input.startedAt,
        finishedAt: Date.now(),
      };
    },
    beginLater(input, seq) {
      const startedAt = input.startedAt ?? Date.now();
      const read: HeldRead = { input: { ...input, startedAt }, seq };
      reading.set(seq, read);
      hold({ read });
      return {
        id: 0,
        runId: input.runId,
        seq,
        kind: input.kind,
        status: 'started',
        tool: input.tool ?? null,
        args: input.args ?? null,
        result: null,
        error: null,
        durationMs: 0,
        tokens: 0,
        idempotencyKey: input.idempotencyKey ?? null,
        startedAt,
        finishedAt: null,
      };
    },
    finishLater(started, input) {
      const read = started.id === 0 ? reading.get(started.seq) : undefined;
      if (read !== undefined) {
        reading.delete(started.seq);
        read.outcome = input;
        // Begun on the store already: its outcome waits as a finish (otherwise it is recorded whole from its place).
        if (read.id !== undefined) hold({ settled: read });
        else if (Date.now() - since >= FLUSH_MS) flushSoon();
      } else hold({ write: { finish: input } });
      return {
        ...started,
        id: read?.id ?? started.id,
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

const joined = (a: StepWrite[] | undefined, b: StepWrite[] | undefined): StepWrite[] | undefined =>
  a === undefined ? b : b === undefined ? a : [...a, ...b];

/** A read that completed before its begin was written: one row, as a decision is. */
function recordOf(read: HeldRead): RecordStepInput {
  const { input, outcome } = read;
  const o = outcome!;
  return {
    runId: input.runId,
    kind: input.kind,
    status: o.status,
    ...(input.tool === undefined ? {} : { tool: input.tool }),
    ...(input.args === undefined ? {} : { args: input.args }),
    ...(o.result === undefined ? {} : { result: o.result }),
    ...(o.error === undefined ? {} : { error: o.error }),
    durationMs: o.durationMs,
    ...(o.tokens === undefined ? {} : { tokens: o.tokens }),
    startedAt: input.startedAt,
    ...(input.idempotencyKey === undefined ? {} : { idempotencyKey: input.idempotencyKey }),
    ...(o.screen === undefined ? {} : { screen: o.screen }),
    usage: o.usage,
    ...(o.eventData === undefined ? {} : { eventData: o.eventData }),
  };
}
