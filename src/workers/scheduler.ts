/**
 * The scheduler every daemon runs (DESIGN §3). Fire times that are due now create their
 * task; fire times missed while no daemon ran follow the schedule's catch-up rule:
 * `skip` (default) creates none, `one` creates one for the newest missed, `all` creates
 * each (at most 1000 per tick). A fire time counts as missed once it is older than the
 * tolerance, which covers a tick arriving a little late.
 */
import type { ScheduleStore } from '../engine/index.js';
import { fireTimes } from './cron.js';

export const DEFAULT_TOLERANCE_MS = 5000;

export interface TickResult {
  created: number[];
  skipped: number[];
}

export async function runSchedulerTick(store: ScheduleStore, now: number, toleranceMs = DEFAULT_TOLERANCE_MS): Promise<TickResult> {
  const out: TickResult = { created: [], skipped: [] };
  for (const s of await store.listSchedules()) {
    const horizon = now - toleranceMs;
    // Skip mode never needs the old fire times: look only at the recent window.
    const from = s.catchUp === 'skip' ? Math.max(s.lastFireAt, horizon - 1) : s.lastFireAt;
    const due = fireTimes(s.cron, from, now, s.catchUp === 'one' ? 100_000 : 1000);
    if (due.length === 0) {
      if (s.catchUp === 'skip' && s.lastFireAt < horizon - 1) await store.fireSchedule(s.id, [], horizon - 1);
      continue;
    }
    const recent = due.filter((t) => t > horizon);
    const missed = due.filter((t) => t <= horizon);
    const fire = s.catchUp === 'all' ? due : s.catchUp === 'one' && missed.length > 0 ? [missed.at(-1)!, ...recent] : recent;
    const result = await store.fireSchedule(s.id, fire, due.at(-1)!);
    out.created.push(...result.created);
    out.skipped.push(...result.skipped);
  }
  return out;
}
