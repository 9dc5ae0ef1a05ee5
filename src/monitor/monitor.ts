/**
 * The monitor (seed 002's DispatcherMonitor, seed 003 §8.2's minimum observability): a
 * snapshot of the engine read from the database — counts per state, throughput, step
 * durations, failure rate, breaker states, stale reclaims, pending approvals — plus live
 * counters fed by the event tail, so a monitor in any process sees every process's work.
 */
import type { RunStore, TaskEvent, TaskManager, TaskState } from '../engine/index.js';

export interface MonitorSnapshot {
  tasks_by_state: Record<TaskState, number>;
  last_event_id: number;
  window_seconds: number;
  /** Tasks completed per second over the window. */
  throughput_per_second: number;
  runs_by_phase: Record<string, number>;
  /** Share of finished runs in the window that did not end completed or degraded. */
  failure_rate: number;
  step_duration_ms: Record<string, { p50: number; p99: number; count: number }>;
  breakers: Array<{ tool: string; state: string; failures: number }>;
  stale_reclaims: number;
  pending_approvals: number;
  /** Events seen by this monitor's tail since it started, by type. */
  events_seen: Record<string, number>;
}

export interface Monitor {
  snapshot(): Promise<MonitorSnapshot>;
  /** Called for each event the tail delivers (for metrics). */
  onEvent(listener: (event: TaskEvent) => void): () => void;
  close(): void;
}

export interface MonitorOptions {
  tm: TaskManager;
  runs: RunStore;
  /** The window of the rates. @defaultValue 60000 */
  windowMs?: number;
  /** Follow the event log live (long-running processes). @defaultValue true */
  follow?: boolean;
  now?: () => number;
}

const SUCCESS = new Set(['completed', 'degraded']);

export async function createMonitor(opts: MonitorOptions): Promise<Monitor> {
  const windowMs = opts.windowMs ?? 60_000;
  const now = opts.now ?? Date.now;
  const seen: Record<string, number> = {};
  const listeners = new Set<(event: TaskEvent) => void>();
  const ac = new AbortController();
  if (opts.follow !== false) {
    const from = await opts.tm.store.lastEventId();
    void (async () => {
      for await (const event of opts.tm.follow({ afterId: from, signal: ac.signal })) {
        seen[event.type] = (seen[event.type] ?? 0) + 1;
        for (const l of listeners) {
          try {
            l(event);
          } catch {
            // A failing listener must not stop the tail.
          }
        }
      }
    })().catch(() => undefined);
  }

  return {
    async snapshot() {
      const at = now();
      const [stats, runStats, breakers, approvals] = await Promise.all([
        opts.tm.stats(),
        opts.runs.runStats(at - windowMs),
        opts.runs.breakers(),
        opts.runs.countApprovals('pending'),
      ]);
      const finished = Object.values(runStats.runsByPhase).reduce((a, b) => a + b, 0);
      const failed = Object.entries(runStats.runsByPhase).filter(([p]) => !SUCCESS.has(p)).reduce((a, [, n]) => a + n, 0);
      return {
        tasks_by_state: stats.byState,
        last_event_id: stats.lastEventId,
        window_seconds: windowMs / 1000,
        throughput_per_second: runStats.completed / (windowMs / 1000),
        runs_by_phase: runStats.runsByPhase,
        failure_rate: finished === 0 ? 0 : failed / finished,
        step_duration_ms: runStats.stepDurations,
        breakers: breakers.map((b) => ({ tool: b.tool, state: b.state, failures: b.failures })),
        stale_reclaims: runStats.staleReclaims,
        pending_approvals: approvals,
        events_seen: { ...seen },
      };
    },
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      ac.abort();
      listeners.clear();
    },
  };
}
