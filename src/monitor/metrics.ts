/**
 * GET /metrics: the engine in Prometheus text format (the one module that imports prom-client).
 *
 * Two sources, chosen by what a series means:
 *
 * - **Gauges are current levels**, read from the database on every scrape: tasks per state,
 *   pending approvals (a COUNT, never a capped page), live daemons, open breakers. Every
 *   process serving /metrics on one database reports the same levels.
 * - **Counters and histograms are fed by the event tail** (`task_events`, DESIGN §4), not by
 *   this process's own work: the work happens in daemons' worker threads and other
 *   processes, and a process-local counter would count only what this process did. The tail
 *   sees every event every process commits, so each series counts the whole engine's work
 *   since this process started (a restart is a counter reset, which `rate()` and
 *   `increase()` absorb). The consequence: two processes serving /metrics on one database
 *   report the same totals — take one of them (`max by`), never `sum` across them.
 *
 * Rates, failure shares and percentiles are not computed here: they are PromQL over these
 * series (`rate(taskloop_runs_finished_total[5m])`, `histogram_quantile(0.99, …)`), so they
 * aggregate over time and scrapes as Prometheus intends. Units are base units (seconds).
 *
 * Labels come from event rows an agent influences (a tool name it asked for): a value that
 * is not a plain name becomes `other`, and past LABEL_LIMIT distinct values per label new
 * ones become `other` too, so a hostile agent cannot blow up the series count.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RunStore, TaskEvent, TaskManager } from '../engine/index.js';
import type { Monitor } from './monitor.js';

export interface Metrics {
  readonly contentType: string;
  render(): Promise<string>;
  close(): void;
}

export interface MetricsSources {
  tm: TaskManager;
  runs: RunStore;
  /** The event tail (createMonitor) that feeds the counters and histograms. */
  monitor: Monitor;
}

/** Distinct values kept per label before new ones are folded into `other`. */
export const LABEL_LIMIT = 200;
const PLAIN = /^[A-Za-z0-9_.:-]{1,64}$/;
/** Seconds: from a fast in-process call to a long model or desktop step. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** Maps untrusted values onto a bounded set of label values. */
function labelGuard(): (value: unknown) => string {
  const seen = new Set<string>();
  return (value) => {
    if (typeof value !== 'string' || !PLAIN.test(value)) return 'other';
    if (seen.has(value)) return value;
    if (seen.size >= LABEL_LIMIT) return 'other';
    seen.add(value);
    return value;
  };
}

export function createMetrics(sources: MetricsSources): Metrics {
  const { tm, runs, monitor } = sources;
  const registry = new Registry();
  const tool = labelGuard();
  const type = labelGuard();
  const phase = labelGuard();
  const kind = labelGuard();
  const status = labelGuard();

  // ---- levels, read at scrape time ----
  new Gauge({
    name: 'taskloop_tasks',
    help: 'Tasks per state, now.',
    labelNames: ['state'],
    registers: [registry],
    async collect() {
      for (const [state, n] of Object.entries((await tm.stats()).byState)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'taskloop_approvals_pending',
    help: 'Approvals waiting for a decision, now.',
    registers: [registry],
    async collect() {
      this.set(await runs.countApprovals('pending'));
    },
  });
  new Gauge({
    name: 'taskloop_daemons',
    help: 'Daemons (processes with worker threads) registered with a heartbeat, now.',
    registers: [registry],
    async collect() {
      // An HTTP server that holds attached runs registers a row of no threads for its
      // leases; it is no daemon (and `daemon --http` would count twice).
      this.set((await runs.daemons()).filter((d) => d.threads > 0).length);
    },
  });
  new Gauge({
    name: 'taskloop_breaker_open',
    help: '1 while the tool breaker is open or half-open, 0 when closed.',
    labelNames: ['tool', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const b of await runs.breakers()) this.set({ tool: tool(b.tool), state: b.state }, b.state === 'closed' ? 0 : 1);
    },
  });

  // ---- counts since this process started, of every process's events ----
  const events = new Counter({ name: 'taskloop_events_total', help: 'Events committed to the event log by any process, by type.', labelNames: ['type'], registers: [registry] });
  const runsFinished = new Counter({ name: 'taskloop_runs_finished_total', help: 'Runs that finished, by phase (completed, degraded, failed, cancelled, rejected, …).', labelNames: ['phase'], registers: [registry] });
  const reclaims = new Counter({ name: 'taskloop_stale_reclaims_total', help: 'Tasks taken back from a claim whose lease ran out.', registers: [registry] });
  const breakerOpened = new Counter({ name: 'taskloop_breaker_opened_total', help: 'Times a tool breaker opened.', labelNames: ['tool'], registers: [registry] });
  const stepSeconds = new Histogram({ name: 'taskloop_step_duration_seconds', help: 'Duration of finished steps, by kind (observe, decide, action).', labelNames: ['kind'], buckets: DURATION_BUCKETS, registers: [registry] });
  const toolSeconds = new Histogram({ name: 'taskloop_tool_call_duration_seconds', help: 'Duration of finished tool calls, by tool and step status.', labelNames: ['tool', 'status'], buckets: DURATION_BUCKETS, registers: [registry] });

  const count = (e: TaskEvent) => {
    const data = (e.data ?? {}) as Record<string, unknown>;
    events.inc({ type: type(e.type) });
    switch (e.type) {
      case 'run.finished':
        runsFinished.inc({ phase: phase(data.phase) });
        break;
      case 'task.stale_reclaimed':
        reclaims.inc();
        break;
      case 'breaker.opened':
        breakerOpened.inc({ tool: tool(data.tool) });
        break;
      case 'run.step_finished': {
        const ms = data.duration_ms;
        if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) break;
        stepSeconds.observe({ kind: kind(data.kind) }, ms / 1000);
        if (typeof data.tool === 'string') toolSeconds.observe({ tool: tool(data.tool), status: status(data.status) }, ms / 1000);
        break;
      }
    }
  };
  const stop = monitor.onEvent(count);
  return {
    contentType: registry.contentType,
    render: () => registry.metrics(),
    close: stop,
  };
}
