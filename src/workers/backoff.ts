/**
 * The daemon's timers, which must never die of a failure: each failure is reported (one line
 * per streak, see faultReporter) and the next try waits longer, until one succeeds.
 */
import type { FaultReporter } from '../engine/index.js';
import { type Job, every } from './cron.js';

/** How long to wait after `failures` failures in a row of a claim or a write retried until it works: 50 ms doubling, at most 2 s. */
export const retryDelayMs = (failures: number): number => Math.min(2000, 50 * 2 ** Math.min(failures, 6));

/**
 * Runs `fn` every `intervalMs` until stopped. A failure is reported (one line per streak) and
 * the next try waits twice as long, up to `maxMs`; the first success restores the interval.
 */
export function repeat(intervalMs: number, maxMs: number, fn: () => Promise<unknown>, report: FaultReporter): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let delay = intervalMs;
  const tick = async () => {
    try {
      await fn();
      report.ok();
      delay = intervalMs;
    } catch (err) {
      report.failed(err);
      delay = Math.min(delay * 2, Math.max(maxMs, intervalMs));
    }
    if (!stopped) timer = setTimeout(() => void tick(), delay);
  };
  timer = setTimeout(() => void tick(), delay);
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** A cron job that skips its ticks with backoff while it keeps failing (cron keeps ticking). */
export function cronWithBackoff(expr: string, fn: () => Promise<void>, report: FaultReporter): Job {
  let notBefore = 0;
  let backoff = 0;
  return every(expr, async () => {
    if (Date.now() < notBefore) return;
    try {
      await fn();
      report.ok();
      backoff = 0;
    } catch (err) {
      report.failed(err);
      backoff = Math.min(backoff === 0 ? 1000 : backoff * 2, 60_000);
      notBefore = Date.now() + backoff;
    }
  }, (err) => report.failed(err));
}
