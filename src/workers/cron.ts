/** Timed jobs and fire times (with engine/schedule-input.ts, which checks an expression, the modules that import `cron`). */
import { CronJob, CronTime } from 'cron';
export { checkCron } from '../engine/schedule-input.js';

/** Fire times of `expr` strictly after `after` and at or before `until` (epoch ms), at most `max`, in UTC. */
export function fireTimes(expr: string, after: number, until: number, max = 1000): number[] {
  const time = new CronTime(expr, 'UTC');
  const out: number[] = [];
  let cursor = after;
  while (out.length < max) {
    const next = time.getNextDateFrom(new Date(cursor), 'UTC').toMillis();
    if (next > until) break;
    out.push(next);
    cursor = next;
  }
  return out;
}

export interface Job {
  stop(): void;
}

/** Runs `fn` on a cron schedule; a tick that is still running is not started again. */
export function every(expr: string, fn: () => Promise<void>, onError: (err: unknown) => void): Job {
  let running = false;
  const job = CronJob.from({
    cronTime: expr,
    start: true,
    unrefTimeout: true,
    onTick: async () => {
      if (running) return;
      running = true;
      try {
        await fn();
      } catch (err) {
        onError(err);
      } finally {
        running = false;
      }
    },
  });
  return { stop: () => void job.stop() };
}
