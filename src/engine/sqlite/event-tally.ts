/**
 * Completions and stale reclaims per window, counted in the event log without an index (so
 * the write path pays nothing) and without rescanning: each call reads only the events
 * written since the previous call, into per-second bins, and sums the bins of the window.
 * A scrape every 15 s of a 60 s window reads each event once, not four times.
 *
 * Event ids grow with time, so a window's first event is found by bisecting the ids
 * (primary-key lookups). Bins are by `created_at` second: events that commit slightly out
 * of clock order (several processes) still land in their own second.
 */
import type { Db } from './connection.js';

export interface Tally {
  completed: number;
  reclaims: number;
}

export function createEventTally(db: Db): (since: number) => Tally {
  // Two statements: SQLite answers a lone min() or max() of the key from the tree's edge, but
  // scans the table for both at once.
  const first = db.prepare<[], { id: number | null }>('SELECT min(id) AS id FROM task_events');
  const last = db.prepare<[], { id: number | null }>('SELECT max(id) AS id FROM task_events');
  const bounds = () => ({ lo: first.get()!.id, hi: last.get()!.id });
  const atOrAfter = db.prepare<[number], { id: number; created_at: number }>('SELECT id, created_at FROM task_events WHERE id >= ? ORDER BY id LIMIT 1');
  const perSecond = db.prepare<[number, number], { sec: number; completed: number; reclaims: number }>(
    `SELECT created_at / 1000 AS sec,
            sum(type = 'task.transitioned' AND json_extract(data, '$.to') = 'completed') AS completed,
            sum(type = 'task.stale_reclaimed') AS reclaims
     FROM task_events WHERE id >= ? AND id <= ? GROUP BY sec`,
  );

  /** The smallest event id written at or after `since` (one past the last id when none is). */
  const firstIdSince = (since: number, lo: number, hi: number): number => {
    let low = lo;
    let high = hi + 1;
    while (low < high) {
      const mid = Math.floor((low + high) / 2);
      const row = atOrAfter.get(mid);
      if (row === undefined || row.created_at >= since) high = mid;
      else low = row.id + 1;
    }
    return low;
  };

  const bins = new Map<number, Tally>();
  /** Events with ids up to this one are in `bins`; null before the first call. */
  let readTo: number | null = null;
  /** The earliest second the bins are complete from. */
  let coveredFrom = Infinity;

  return (since) => {
    const { lo, hi } = bounds();
    if (lo === null || hi === null) return { completed: 0, reclaims: 0 };
    const fromSec = Math.floor(since / 1000);
    if (readTo === null || fromSec < coveredFrom || readTo < lo - 1) {
      // First call, a longer window than before, or the log was compacted under us: start over.
      bins.clear();
      readTo = firstIdSince(fromSec * 1000, lo, hi) - 1;
      coveredFrom = fromSec;
    }
    if (hi > readTo) {
      for (const row of perSecond.all(readTo + 1, hi)) {
        const bin = bins.get(row.sec) ?? { completed: 0, reclaims: 0 };
        bin.completed += row.completed;
        bin.reclaims += row.reclaims;
        bins.set(row.sec, bin);
      }
      readTo = hi;
    }
    const total: Tally = { completed: 0, reclaims: 0 };
    for (const [sec, bin] of bins) {
      if (sec < fromSec) {
        bins.delete(sec);
        continue;
      }
      total.completed += bin.completed;
      total.reclaims += bin.reclaims;
    }
    coveredFrom = Math.max(coveredFrom, fromSec);
    return total;
  };
}
