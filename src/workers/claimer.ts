/**
 * The claim loop every host of work shares: a daemon's worker thread (worker-serve.ts) and
 * a library worker (create-worker.ts). It claims only while the host has room (back-pressure:
 * a host never holds a task it cannot start); after a claim that found nothing it waits for
 * the next commit anywhere, a slot freed or `idleMs`, so an idle host costs nothing and a
 * commit makes one claim attempt, not one per free slot. A commit that lands while a claim
 * is in flight (after its look for a task) is not left to the nap's timeout: the claimer
 * looks again at once. A claim that throws is retried with a growing backoff that only
 * `stop` cuts short (one log line per streak, through the host's fault reporter).
 *
 * Bursts: a host that says how many it could start (`room`) is asked for several claims at
 * once while every claim finds a task, twice as many each round up to MAX_BURST; the first
 * claim that finds nothing drops it back to one. On a store with group commit (a daemon
 * thread's SQLite connection) a burst is one transaction, and the runs it starts go on in
 * step and share their later commits too; claimed one at a time, each run's writes went
 * alone (2 writes per commit, against ~30 with bursts, measured in one daemon thread).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultReporter } from '../engine/index.js';
import { retryDelayMs } from './backoff.js';

export interface ClaimerOptions<T> {
  /** Whether the host can start one more now. */
  hasRoom(): boolean;
  /** How many the host could start now (a burst asks for up to that many at once). @defaultValue 1 */
  room?(): number;
  /**
   * One claim; null when there was nothing to claim (or no room after all). `likely`: every
   * claim of the last round found a task (a burst), so a read first to spare a write lock
   * taken for nothing would most likely be spent for nothing itself.
   */
  claim(likely: boolean): Promise<T | null>;
  /** Starts what was claimed; not awaited. Also called when `stop` came during the claim. */
  start(claimed: T): void;
  /** A claim threw: true stops the claimer for good (a fault after which nothing may be written). */
  fatal?(err: unknown): boolean;
  report: FaultReporter;
  /** The longest nap without a wake. */
  idleMs: number;
}

export interface Claimer {
  /** Something committed: a task may have become claimable. */
  committed(): void;
  /** A slot was freed. */
  freed(): void;
  /** Claims no more (a claim in flight still ends in `start`). */
  stop(): void;
  /** Resolves once the loop has ended. */
  readonly done: Promise<void>;
}

/** The most claims one burst asks for. */
export const MAX_BURST = 16;

export function startClaimer<T>(o: ClaimerOptions<T>): Claimer {
  let stopped = false;
  let burst = 1;
  // Set by every commit: one that lands during a claim must not wait for the nap's timeout.
  let changed = false;
  let wake: (() => void) | undefined;
  const rouse = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const idle = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(rouse, ms);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const halt = new AbortController();
  const pause = (ms: number) => sleep(ms, undefined, { signal: halt.signal }).catch(() => undefined);

  const loop = async (): Promise<void> => {
    while (!stopped) {
      if (!o.hasRoom()) {
        await idle(o.idleMs);
        continue;
      }
      changed = false;
      const asked = Math.max(1, Math.min(burst, o.room?.() ?? 1));
      const likely = burst > 1;
      const settled = await Promise.allSettled(Array.from({ length: asked }, () => o.claim(likely)));
      let found = 0;
      let failure: { reason: unknown } | undefined;
      for (const s of settled) {
        if (s.status === 'rejected') failure ??= s;
        else if (s.value !== null) {
          found++;
          o.start(s.value);
        }
      }
      if (failure !== undefined) {
        burst = 1;
        if (o.fatal?.(failure.reason) === true) return;
        o.report.failed(failure.reason);
        await pause(retryDelayMs(o.report.failures));
        continue;
      }
      o.report.ok();
      if (found < asked) {
        burst = 1;
        if (!changed && !stopped) await idle(o.idleMs);
        continue;
      }
      burst = Math.min(burst * 2, MAX_BURST);
    }
  };

  return {
    committed() {
      changed = true;
      if (o.hasRoom()) rouse();
    },
    freed: rouse,
    stop() {
      stopped = true;
      halt.abort();
      rouse();
    },
    done: loop(),
  };
}
