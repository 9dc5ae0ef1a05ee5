/** Read-only figures for the monitor: run outcomes, step durations, reclaims, throughput. */
import type { RunStats } from '../run-store.js';
import type { Db } from './connection.js';

const STEP_SAMPLE = 2000;

export function prepareRunStats(db: Db): (since: number, now: number) => RunStats {
  const phases = db.prepare<[number], { phase: string; n: number }>('SELECT phase, count(*) AS n FROM runs WHERE finished_at >= ? GROUP BY phase');
  const steps = db.prepare<[number], { kind: string; duration_ms: number }>(
    'SELECT kind, duration_ms FROM steps WHERE duration_ms IS NOT NULL ORDER BY id DESC LIMIT ?',
  );
  const reclaims = db.prepare<[number], { n: number }>("SELECT count(*) AS n FROM task_events WHERE type = 'task.stale_reclaimed' AND created_at >= ?");
  const completed = db.prepare<[number], { n: number }>("SELECT count(*) AS n FROM tasks WHERE state = 'completed' AND updated_at >= ?");
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
    return {
      runsByPhase: Object.fromEntries(phases.all(since).map((r) => [r.phase, r.n])),
      stepDurations,
      staleReclaims: reclaims.get(since)!.n,
      completed: completed.get(since)!.n,
      windowMs: now - since,
    };
  };
}
