/**
 * The monitor's figures at scale: `runStats` (what every /metrics scrape and `taskloop stats`
 * read) and `stop --all`'s lookup of live runs, over a database of 1M tasks, 4M events and
 * 1M finished runs. Run with `npm run bench:stats` (builds dist/ first).
 *
 * The rows are written with bulk SQL (not through the engine: 1M lifecycles would take
 * minutes), with event times spread 20 ms apart up to now, a quarter of them completions.
 * Knob: BENCH_STATS_TASKS (1,000,000).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteRunStore, createSqliteStore } from '../dist/engine/index.js';
import { fmtNum, log, table } from './lib/util.mjs';

const N = Number(process.env.BENCH_STATS_TASKS ?? 1_000_000);
const dir = mkdtempSync(join(tmpdir(), 'taskloop-stats-'));
const store = createSqliteStore({ path: join(dir, 'scale.db') });
const { db } = store;
const now = Date.now();
const first = now - N * 4 * 20;

log(`filling ${N.toLocaleString('en-US')} tasks, ${(4 * N).toLocaleString('en-US')} events, ${N.toLocaleString('en-US')} runs`);
db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N})
  INSERT INTO tasks (id, title, state, priority, queue, creator, attempts, max_attempts, run_after, created_at, updated_at, card)
  SELECT i, 't' || i, CASE WHEN i % 100 = 0 THEN 'pending' ELSE 'completed' END, 0, 'default', 'operator', 1, 3,
         ${first} + i * 80, ${first} + i * 80, ${first} + i * 80, '{}' FROM s`);
db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${4 * N})
  INSERT INTO task_events (id, task_id, type, actor, data, created_at, prev_id)
  SELECT i, (i + 3) / 4,
         CASE i % 4 WHEN 0 THEN 'task.created' WHEN 1 THEN 'task.claimed' WHEN 2 THEN 'run.started'
           ELSE CASE WHEN i % 10007 = 3 THEN 'task.stale_reclaimed' ELSE 'task.transitioned' END END,
         'a', CASE i % 4 WHEN 3 THEN '{"from":"review","to":"completed"}' ELSE '{}' END, ${first} + i * 20, NULL FROM s`);
db.exec(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ${N})
  INSERT INTO runs (id, task_id, phase, budget, usage, started_at, finished_at)
  SELECT i, i, 'completed', '{}', '{}', ${first} + i * 80, ${first} + i * 80 + 50 FROM s`);

const runs = createSqliteRunStore(store);
const rows = [];
const time = async (what, fn) => {
  const t0 = performance.now();
  const out = await fn();
  rows.push([what, fmtNum(performance.now() - t0), out]);
};
for (const [label, windowMs] of [['60 s window, first call', 60_000], ['60 s window, next call', 60_000], ['60 s window, next call', 60_000], ['1 h window, first call', 3_600_000], ['1 h window, next call', 3_600_000]]) {
  await time(`runStats: ${label}`, async () => {
    const s = await runs.runStats(Date.now() - windowMs);
    return `${s.completed} completed, ${s.staleReclaims} reclaims`;
  });
}
await time('stop --all lookup (pause all)', async () => `${(await runs.setControl({ target: 'all', state: 'paused', actor: { id: 'op', role: 'operator' } })).length} live runs`);

console.log(`${N.toLocaleString('en-US')} tasks, ${(4 * N).toLocaleString('en-US')} events, ${N.toLocaleString('en-US')} runs; Node ${process.version}`);
console.log(table(['call', 'ms', 'result'], rows));
await store.close();
rmSync(dir, { recursive: true, force: true });
