/**
 * The scheduler every daemon runs (DESIGN §3). Fire times that are due now create their
 * task; fire times missed while no daemon ran follow the schedule's catch-up rule:
 * `skip` (default) creates none, `one` creates one for the newest missed, `all` creates
 * each (at most 1000 per tick). A fire time counts as missed once it is older than the
 * tolerance, which covers a tick arriving a little late.
 */
import type { Schedule, ScheduleStore } from '../engine/index.js';
import { fireTimes } from './cron.js';

export const DEFAULT_TOLERANCE_MS = 5000;

export interface TickResult {
  created: number[];
  skipped: number[];
  /** Schedules whose tick failed; the others were still fired. */
  failed: Array<{ scheduleId: number; error: unknown }>;
}

export async function runSchedulerTick(store: ScheduleStore, now: number, toleranceMs = DEFAULT_TOLERANCE_MS): Promise<TickResult> {
  const out: TickResult = { created: [], skipped: [], failed: [] };
  for (const s of await store.listSchedules()) {
    try {
      const result = await tickOne(store, s, now, toleranceMs);
      out.created.push(...result.created);
      out.skipped.push(...result.skipped);
    } catch (error) {
      // One schedule that cannot fire (a cron stored before it was checked, a fault on its
      // row) must not keep the others from firing.
      out.failed.push({ scheduleId: s.id, error });
    }
  }
  return out;
}

async function tickOne(store: ScheduleStore, s: Schedule, now: number, toleranceMs: number): Promise<{ created: number[]; skipped: number[] }> {
  const horizon = now - toleranceMs;
  // Skip mode never needs the old fire times: look only at the recent window.
  const from = s.catchUp === 'skip' ? Math.max(s.lastFireAt, horizon - 1) : s.lastFireAt;
  const due = fireTimes(s.cron, from, now, s.catchUp === 'one' ? 100_000 : 1000);
  if (due.length === 0) {
    if (s.catchUp === 'skip' && s.lastFireAt < horizon - 1) await store.fireSchedule(s.id, [], horizon - 1);
    return { created: [], skipped: [] };
  }
  const recent = due.filter((t) => t > horizon);
  const missed = due.filter((t) => t <= horizon);
  const fire = s.catchUp === 'all' ? due : s.catchUp === 'one' && missed.length > 0 ? [missed.at(-1)!, ...recent] : recent;
  return store.fireSchedule(s.id, fire, due.at(-1)!);
}
