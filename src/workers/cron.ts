/** Cron expressions and timed jobs (the one module that imports `cron`). */
import { CronJob, CronTime, validateCronExpression } from 'cron';
import { EngineError } from '../engine/index.js';

/** Throws VALIDATION_FAILED unless `expr` is a cron expression (5 fields, or 6 with seconds). */
export function checkCron(expr: string): void {
  const { valid, error } = validateCronExpression(expr);
  if (!valid) throw new EngineError('VALIDATION_FAILED', `cron: '${expr}' is not a cron expression (${error?.message ?? 'invalid'})`);
}

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
