/** Read-only figures for the monitor: run outcomes, step durations, reclaims, throughput. */
import type { RunStats } from '../run-store.js';
import { STEP_SAMPLE, stepDurations } from '../run-stats.js';
import type { Db } from './connection.js';
import { createEventTally } from './event-tally.js';

export function prepareRunStats(db: Db): (since: number, now: number) => RunStats {
  const phases = db.prepare<[number], { phase: string; n: number }>('SELECT phase, count(*) AS n FROM runs WHERE finished_at >= ? GROUP BY phase');
  const steps = db.prepare<[number], { kind: string; duration_ms: number }>(
    'SELECT kind, duration_ms FROM steps WHERE duration_ms IS NOT NULL ORDER BY id DESC LIMIT ?',
  );
  // Completions and reclaims: counted in the event log, incrementally (event-tally.ts).
  const tally = createEventTally(db);
  return (since, now) => {
    const inWindow = tally(since);
    return {
      runsByPhase: Object.fromEntries(phases.all(since).map((r) => [r.phase, r.n])),
      stepDurations: stepDurations(steps.all(STEP_SAMPLE)),
      staleReclaims: inWindow.reclaims ?? 0,
      completed: inWindow.completed ?? 0,
      windowMs: now - since,
    };
  };
}
