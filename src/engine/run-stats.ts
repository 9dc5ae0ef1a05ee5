/** The monitor's step figures, the same on every store: p50 and p99 by kind over the newest steps. */
import type { RunStats } from './run-store.js';

/** The newest steps the durations are taken over. */
export const STEP_SAMPLE = 2000;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? 0;

export function stepDurations(steps: Array<{ kind: string; duration_ms: number }>): RunStats['stepDurations'] {
  const byKind = new Map<string, number[]>();
  for (const s of steps) {
    const list = byKind.get(s.kind) ?? [];
    list.push(s.duration_ms);
    byKind.set(s.kind, list);
  }
  const out: RunStats['stepDurations'] = {};
  for (const [kind, list] of byKind) {
    list.sort((a, b) => a - b);
    out[kind] = { p50: pct(list, 0.5), p99: pct(list, 0.99), count: list.length };
  }
  return out;
}
