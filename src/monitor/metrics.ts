/** The monitor's figures in Prometheus text format (the one module that imports prom-client). */
import { Counter, Gauge, Registry } from 'prom-client';
import type { Monitor } from './monitor.js';

export interface Metrics {
  readonly contentType: string;
  render(): Promise<string>;
  close(): void;
}

export function createMetrics(monitor: Monitor): Metrics {
  const registry = new Registry();
  const gauge = (name: string, help: string, labelNames: string[], read: (g: Gauge<string>) => Promise<void>) =>
    new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      async collect() {
        await read(this);
      },
    });
  let snapshot: Awaited<ReturnType<Monitor['snapshot']>> | undefined;
  // One snapshot per scrape, shared by every gauge.
  const fresh = async () => (snapshot ??= await monitor.snapshot());
  gauge('taskloop_tasks', 'Tasks per state.', ['state'], async (g) => {
    for (const [state, n] of Object.entries((await fresh()).tasks_by_state)) g.set({ state }, n);
  });
  gauge('taskloop_throughput_per_second', 'Tasks completed per second over the monitor window.', [], async (g) => g.set((await fresh()).throughput_per_second));
  gauge('taskloop_run_failure_rate', 'Share of runs finished in the window that did not complete.', [], async (g) => g.set((await fresh()).failure_rate));
  gauge('taskloop_step_duration_p50_ms', 'Median step duration over the newest steps, by kind.', ['kind'], async (g) => {
    for (const [kind, d] of Object.entries((await fresh()).step_duration_ms)) g.set({ kind }, d.p50);
  });
  gauge('taskloop_step_duration_p99_ms', '99th percentile step duration over the newest steps, by kind.', ['kind'], async (g) => {
    for (const [kind, d] of Object.entries((await fresh()).step_duration_ms)) g.set({ kind }, d.p99);
  });
  gauge('taskloop_breaker_open', '1 when the tool breaker is open or half-open.', ['tool', 'state'], async (g) => {
    g.reset();
    for (const b of (await fresh()).breakers) g.set({ tool: b.tool, state: b.state }, b.state === 'closed' ? 0 : 1);
  });
  gauge('taskloop_stale_reclaims', 'Tasks reclaimed from lost claims in the window.', [], async (g) => g.set((await fresh()).stale_reclaims));
  gauge('taskloop_approvals_pending', 'Approvals waiting for a decision.', [], async (g) => g.set((await fresh()).pending_approvals));
  const events = new Counter({ name: 'taskloop_events_total', help: 'Events seen by this process’s tail, by type.', labelNames: ['type'], registers: [registry] });
  const stop = monitor.onEvent((e) => events.inc({ type: e.type }));
  return {
    contentType: registry.contentType,
    async render() {
      snapshot = undefined;
      return registry.metrics();
    },
    close: stop,
  };
}
