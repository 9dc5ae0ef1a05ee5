import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { SqliteTaskStore } from '../../src/engine/index.js';
import { LABEL_LIMIT, createMetrics } from '../../src/monitor/metrics.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { ROOT, operator, waitFor } from '../helpers.js';
import { type Harness, card, drive, harness, loopContext, runCard } from '../workers/harness.js';
import type { Planner } from '../../src/workers/planner.js';
import { spawnServe } from './serve-process.js';

const PROMTOOL = process.env.TASKLOOP_PROMTOOL ?? '/usr/bin/promtool';

/** `promtool check metrics` over `text`: its exit status and everything it printed. */
function promtool(text: string): { status: number | null; output: string } {
  const r = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  expect(r.error, `${PROMTOOL} did not run: npm test installs it (Debian's prometheus package), or set TASKLOOP_PROMTOOL`).toBeUndefined();
  return { status: r.status, output: `${r.stdout}${r.stderr}` };
}

/** A sample's value in Prometheus text, or undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Runs the next claimable task until it ends or parks. */
async function runNext(h: Harness) {
  const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
  return drive(loopContext(h, claim));
}

describe('monitor and metrics', () => {
  it('snapshots counts, throughput, step durations, failure rate, breakers, reclaims and approvals from the database', async () => {
    const h = harness();
    const monitor = await createMonitor({ tm: h.tm, runs: h.runs, follow: false });
    onTestFinished(() => monitor.close());
    await runCard(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    await runCard(h, card({ allowed_tools: ['broken'], script: [1, 2, 3].map((n) => ({ action: 'tool', tool: 'broken', args: { n } })) }));
    const s = await monitor.snapshot();
    expect(s.tasks_by_state).toMatchObject({ completed: 1, failed: 1 });
    expect(s.runs_by_phase).toEqual({ completed: 1, failed: 1 });
    expect(s.failure_rate).toBe(0.5);
    expect(s.throughput_per_second).toBeCloseTo(1 / 60, 5);
    expect(s.step_duration_ms.action!.count).toBe(4);
    expect(s.breakers).toEqual([{ tool: 'broken', state: 'open', failures: 3 }]);
    expect(s.pending_approvals).toBe(0);
  });

  it('counts events committed by other processes through the tail', async () => {
    const h = harness();
    const monitor = await createMonitor({ tm: h.tm, runs: h.runs });
    const metrics = createMetrics({ tm: h.tm, runs: h.runs, monitor });
    onTestFinished(() => {
      metrics.close();
      monitor.close();
    });
    await promisify(execFile)(process.execPath, [join(ROOT, 'test/fixtures/create.mjs'), h.path, 'from elsewhere']);
    await waitFor(async () => (await metrics.render()).includes('taskloop_events_total{type="task.created"} 1'), 10_000, 'the tail to count the event');
    const text = await metrics.render();
    expect(text).toContain('# TYPE taskloop_tasks gauge');
    expect(text).toContain('taskloop_tasks{state="pending"} 1');
    expect(text).toContain('taskloop_approvals_pending 0');
    expect(metrics.contentType).toMatch(/^text\/plain/);
  });

  it('a real server’s /metrics over real runs passes promtool check metrics: counters, histograms in seconds, levels as gauges, approvals counted past 1,000', async () => {
    const h = harness();
    const tickets = ticketStoreFor(h.tm.store);
    await tickets.seed();
    const served = await spawnServe(h.path);
    // The runs happen in this process, on another connection: only the event log tells the server.
    await runCard(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    await runCard(h, card({ allowed_tools: ['broken'], script: [1, 2, 3].map((n) => ({ action: 'tool', tool: 'broken', args: { n } })) }));
    // A ticket whose approval expires ends degraded; another waits for its approval.
    await h.tm.createTask({ title: 'degrades', card: ticketCard('T-1024', { onExpiry: 'degraded' }) }, operator);
    await runNext(h);
    const db = (h.tm.store as SqliteTaskStore).db;
    db.prepare('UPDATE approvals SET expires_at = ?').run(Date.now() - 1);
    expect(await h.runs.expireApprovals()).toHaveLength(1);
    expect((await runNext(h)).result.phase).toBe('degraded');
    await h.tm.createTask({ title: 'waits', card: ticketCard('T-1025') }, operator);
    expect((await runNext(h)).result.phase).toBe('waiting_approval');
    // 1,200 more pending approvals (copies of the real one): the gauge is a COUNT, not a page.
    db.prepare(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1200)
      INSERT INTO approvals (task_id, run_id, step_id, tool, args, fingerprint, state, created_at, expires_at)
      SELECT task_id, run_id, step_id, tool, args, fingerprint, state, created_at, expires_at FROM approvals, n WHERE state = 'pending'`).run();

    const scrape = async () => {
      const res = await fetch(`${served.url}/metrics`, { headers: served.auth });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
      return res.text();
    };
    let last = '';
    const text = await waitFor(async () => {
      const t = (last = await scrape());
      return sample(t, 'taskloop_runs_finished_total{phase="degraded"}') === 1 && sample(t, 'taskloop_events_total{type="approval.requested"}') === 2 ? t : undefined;
    }, 15_000, 'the server’s tail to count the runs').catch((err: Error) => {
      throw new Error(`${err.message}\n${last}`);
    });

    const lint = promtool(text);
    expect(lint, text).toEqual({ status: 0, output: '' });

    // A daemon counts; a server's row for its attached runs (no threads) does not.
    await h.runs.registerDaemon({ id: 'd-1', host: 'h', pid: process.pid, agent: 'daemon-a', threads: 2 });
    await h.runs.registerDaemon({ id: 's-1', host: 'h', pid: process.pid, agent: 'http-a', threads: 0 });
    expect(sample(await scrape(), 'taskloop_daemons')).toBe(1);

    expect(sample(text, 'taskloop_tasks{state="completed"}')).toBe(2);
    expect(sample(text, 'taskloop_tasks{state="failed"}')).toBe(1);
    expect(sample(text, 'taskloop_tasks{state="waiting"}')).toBe(1);
    expect(sample(text, 'taskloop_approvals_pending')).toBe(1201);
    expect(sample(text, 'taskloop_breaker_open{tool="broken",state="open"}')).toBe(1);
    expect(sample(text, 'taskloop_breaker_opened_total{tool="broken"}')).toBe(1);
    expect(sample(text, 'taskloop_runs_finished_total{phase="completed"}')).toBe(1);
    expect(sample(text, 'taskloop_runs_finished_total{phase="failed"}')).toBe(1);
    expect(sample(text, 'taskloop_events_total{type="task.created"}')).toBe(4);
    expect(text).toContain('# TYPE taskloop_events_total counter');
    expect(text).toContain('# TYPE taskloop_step_duration_seconds histogram');
    expect(text).toContain('# TYPE taskloop_tool_call_duration_seconds histogram');
    expect(sample(text, 'taskloop_tool_call_duration_seconds_count{tool="broken",status="failed"}')).toBe(3);
    expect(sample(text, 'taskloop_tool_call_duration_seconds_count{tool="noop",status="ok"}')).toBe(1);
    expect(sample(text, 'taskloop_step_duration_seconds_bucket{le="+Inf",kind="action"}')).toBeGreaterThanOrEqual(4);
    // Nothing computed in the process: no rates, shares or percentiles, no milliseconds.
    expect(text).not.toMatch(/_ms\b|_p50|_p99|per_second|failure_rate/);
    // The check can fail: the old export's percentile gauge in milliseconds is refused.
    expect(promtool('# HELP taskloop_step_duration_p50_ms Median.\n# TYPE taskloop_step_duration_p50_ms gauge\ntaskloop_step_duration_p50_ms 3\n').output).toMatch(/unit/);
  });

  it('a hostile agent’s tool names cannot forge series or grow the label set without bound', async () => {
    const h = harness();
    const monitor = await createMonitor({ tm: h.tm, runs: h.runs });
    const metrics = createMetrics({ tm: h.tm, runs: h.runs, monitor });
    onTestFinished(() => {
      metrics.close();
      monitor.close();
    });
    const forged = 'x"} 1\ntaskloop_forged 1\n#';
    const names = [forged, ...Array.from({ length: LABEL_LIMIT + 20 }, (_, i) => `made_up_${i}`)];
    // A model that names tools it was never offered (a hostile or confused LLM planner), over
    // several runs (the loop ends a run that keeps asking for refused tools); the label set spans runs.
    const RUN = 4;
    const runs = Math.ceil(names.length / RUN);
    for (let r = 0; r < runs; r++) {
      const mine = names.slice(r * RUN, (r + 1) * RUN);
      let next = 0;
      const hostile: Planner = {
        name: 'hostile',
        async decide() {
          const tool = mine[next++];
          return { decision: tool === undefined ? { action: 'done', reason: 'done' } : { action: 'tool', tool, args: {}, reason: 'why not' } };
        },
      };
      await runCard(h, card({ allowed_tools: ['noop'], budget: { max_steps: 1000, max_failures: 100 } }), { planner: () => hostile });
    }
    let last = '';
    const text = await waitFor(async () => {
      const t = (last = await metrics.render());
      return sample(t, 'taskloop_events_total{type="run.finished"}') === runs ? t : undefined;
    }, 15_000, 'the run to finish').catch((err: Error) => {
      throw new Error(`${err.message}\n${last}`);
    });
    expect(text).not.toContain('taskloop_forged');
    const tools = new Set([...text.matchAll(/^taskloop_tool_call_duration_seconds_count\{tool="([^"]*)"/gm)].map((m) => m[1]));
    expect(tools.has('other')).toBe(true);
    expect(tools.has('made_up_0')).toBe(true);
    expect(tools.size).toBe(LABEL_LIMIT + 1);
    expect(promtool(text)).toEqual({ status: 0, output: '' });
  });
});
