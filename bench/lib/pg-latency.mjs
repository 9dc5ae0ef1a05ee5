/**
 * Claim latency on PostgreSQL with a small and a big backlog, timed interleaved (as the
 * queue benchmark's scenario 4): each backlog is on its own schema, bulk-inserted in one
 * INSERT … SELECT generate_series and ANALYZEd; each round times one
 * claimTask({agent, start:true}) on each side (alternating which goes first), then, untimed,
 * completes the claimed task (review → completed) and creates one task, so exactly
 * `backlog` tasks are pending at every timed claim and claimed rows do not pile up.
 */
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { adminQuery, schemaUrl } from './pg-server.mjs';
import { ACCEPTANCE } from './pg-worker.mjs';
import { log, nowNs, percentile, seconds } from './util.mjs';

const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
const AGENT = 'agent-1';

/**
 * `count` pending tasks straight into `tasks` (migrated already): the columns createTasks
 * writes for a plain task (tasks.ts), the rest at their defaults. No task.created events.
 * run_after is a second in the past in the database's clock, so every row is claimable.
 */
export async function bulkInsert(url, schema, count) {
  await adminQuery(
    url,
    `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, run_after, unmet_deps, created_at, updated_at, card)
     SELECT 'task ' || i, 'pending', 0, 'operator', 'operator', 3, 'default', t.now - 1000, 0, t.now - 1000, t.now - 1000, '{"goal":"benchmark"}'
     FROM generate_series(1, $1::int) AS i, (SELECT (extract(epoch from clock_timestamp()) * 1000)::bigint AS now) AS t`,
    [count],
    schema,
  );
  await adminQuery(url, 'ANALYZE tasks', [], schema);
}

export async function benchClaimLatency(url, schemas, backlogs, samples, warmup) {
  const sides = [];
  try {
    for (let k = 0; k < schemas.length; k++) {
      const manager = createTaskManager({ store: createPgStore({ url: schemaUrl(url, schemas[k]), poolSize: 2 }) });
      sides.push({ backlog: backlogs[k], schema: schemas[k], manager, lat: [] });
      await manager.store.ready; // migrated
      const t0 = nowNs();
      await bulkInsert(url, schemas[k], backlogs[k]);
      log(`  backlog of ${backlogs[k].toLocaleString('en-US')} inserted and analyzed in ${seconds(t0, nowNs()).toFixed(1)} s`);
    }
    await adminQuery(url, 'CHECKPOINT');
    for (let i = 0; i < warmup + samples; i++) {
      const order = i % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const start = nowNs();
        const task = await side.manager.claimTask({ agent: AGENT, start: true });
        const us = Number(nowNs() - start) / 1000;
        if (task === null) throw new Error('claim latency: the backlog ran dry');
        if (i >= warmup) side.lat.push(us);
        await side.manager.transitionTask({
          taskId: task.id,
          to: 'review',
          actor: { id: AGENT, role: 'agent' },
          claimToken: task.claimToken,
          then: [{ to: 'completed', actor: ACCEPTANCE }],
        });
        await side.manager.createTask({ title: `task x${i}`, card: { goal: 'benchmark', n: i } }, OPERATOR);
      }
      if ((i + 1) % 2000 === 0) log(`  ${i + 1} of ${warmup + samples} rounds`);
    }
    const out = [];
    for (const { backlog, schema, lat } of sides) {
      const [{ n: pending }] = await adminQuery(url, "SELECT count(*) AS n FROM tasks WHERE state = 'pending'", [], schema);
      if (pending !== backlog) throw new Error(`claim latency: ${pending} pending at the end, expected ${backlog}`);
      lat.sort((a, b) => a - b);
      const at = (p) => percentile(lat, p);
      const over5ms = lat.filter((x) => x > 5000).length;
      out.push({ backlog, samples, p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: lat[lat.length - 1], over5ms });
    }
    return out;
  } finally {
    for (const side of sides) await side.manager.close();
  }
}
