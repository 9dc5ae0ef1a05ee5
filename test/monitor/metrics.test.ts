import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createMetrics } from '../../src/monitor/metrics.js';
import { createMonitor } from '../../src/monitor/monitor.js';
import { ROOT, waitFor } from '../helpers.js';
import { card, harness, runCard } from '../workers/harness.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

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

  it('serves Prometheus text, counting events committed by other processes through the tail', async () => {
    const h = harness();
    const monitor = await createMonitor({ tm: h.tm, runs: h.runs });
    const metrics = createMetrics(monitor);
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
});
