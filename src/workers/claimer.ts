/**
 * The claim loop every host of work shares: a daemon's worker thread (worker-serve.ts) and
 * a library worker (create-worker.ts). It claims only while the host has room (back-pressure:
 * a host never holds a task it cannot start); after a claim that found nothing it waits for
 * the next commit anywhere, a slot freed or `idleMs`, so an idle host costs nothing and a
 * commit makes one claim attempt, not one per free slot. A commit that lands while a claim
 * is in flight (after its look for a task) is not left to the nap's timeout: the claimer
 * looks again at once. A claim that throws is retried with a growing backoff that only
 * `stop` cuts short (one log line per streak, through the host's fault reporter).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { FaultReporter } from '../engine/index.js';
import { retryDelayMs } from './backoff.js';

export interface ClaimerOptions<T> {
  /** Whether the host can start one more now. */
  hasRoom(): boolean;
  /** One claim; null when there was nothing to claim (or no room after all). */
  claim(): Promise<T | null>;
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

export function startClaimer<T>(o: ClaimerOptions<T>): Claimer {
  let stopped = false;
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
      let claimed: T | null;
      try {
        claimed = await o.claim();
        o.report.ok();
      } catch (err) {
        if (o.fatal?.(err) === true) return;
        o.report.failed(err);
        await pause(retryDelayMs(o.report.failures));
        continue;
      }
      if (claimed === null) {
        if (!changed && !stopped) await idle(o.idleMs);
        continue;
      }
      o.start(claimed);
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
