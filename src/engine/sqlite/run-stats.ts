/** Read-only figures for the monitor: run outcomes, step durations, reclaims, throughput. */
import type { RunStats } from '../run-store.js';
import type { Db } from './connection.js';
import { createEventTally } from './event-tally.js';

const STEP_SAMPLE = 2000;

export function prepareRunStats(db: Db): (since: number, now: number) => RunStats {
  const phases = db.prepare<[number], { phase: string; n: number }>('SELECT phase, count(*) AS n FROM runs WHERE finished_at >= ? GROUP BY phase');
  const steps = db.prepare<[number], { kind: string; duration_ms: number }>(
    'SELECT kind, duration_ms FROM steps WHERE duration_ms IS NOT NULL ORDER BY id DESC LIMIT ?',
  );
  // Completions and reclaims: counted in the event log, incrementally (event-tally.ts).
  const tally = createEventTally(db);
  const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;
  return (since, now) => {
    const byKind = new Map<string, number[]>();
    for (const s of steps.all(STEP_SAMPLE)) {
      const list = byKind.get(s.kind) ?? [];
      list.push(s.duration_ms);
      byKind.set(s.kind, list);
    }
    const stepDurations: RunStats['stepDurations'] = {};
    for (const [kind, list] of byKind) {
      list.sort((a, b) => a - b);
      stepDurations[kind] = { p50: pct(list, 0.5), p99: pct(list, 0.99), count: list.length };
    }
    const inWindow = tally(since);
    return {
      runsByPhase: Object.fromEntries(phases.all(since).map((r) => [r.phase, r.n])),
      stepDurations,
      staleReclaims: inWindow.reclaims ?? 0,
      completed: inWindow.completed ?? 0,
      windowMs: now - since,
    };
  };
}
