/**
 * The emergency stop (`stop --all`) on PostgreSQL finds its targets from the live tasks and
 * the open runs: as an EXISTS per row it read every pending task (a bitmap of all of them,
 * filtered), inside the transaction that locks its targets.
 */
import { describe, expect, it } from 'vitest';
import { LIVE_SQL } from '../../src/engine/postgres/controls.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { freshManager, operator } from '../helpers.js';
import { execSql, portsOf } from '../stores.js';
import { sql, withClient } from './sql.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

/** Every "Actual Rows" in a JSON plan. */
const actualRows = (plan: unknown): number[] => [...JSON.stringify(plan).matchAll(/"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));

describe('stop --all on PostgreSQL', () => {
  it('reads the open runs and the live states, not the pending tasks, and stops every live run, a requeued one too', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const live: number[] = [];
    for (let i = 0; i < 3; i++) live.push((await tm.createTask({ title: `run ${i}`, card: CARD, priority: 9 }, operator)).task.id);
    for (let i = 0; i < 3000; i += 1000) await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `waiting ${i + j}` })), operator);
    for (let i = 0; i < 3; i++) expect((await runs.claimRun({ agent: 'd', withCard: true }, (t, now) => budgetOfTask(t.card, now)))?.task.id).toBe(live[i]);
    // A run whose task went back to pending (a parked run a stop requeued) is still live.
    await execSql(tm, "UPDATE tasks SET state = 'pending', assignee = NULL, claim_token = NULL WHERE id = $1", [live[2]]);
    for (const analyzed of [false, true]) {
      if (analyzed) await sql(tm.path, 'ANALYZE');
      const plan = await withClient(tm.path, async (client) => {
        await client.query('BEGIN');
        try {
          return (await client.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${LIVE_SQL}`)).rows[0]['QUERY PLAN'];
        } finally {
          await client.query('ROLLBACK');
        }
      });
      // No node of the plan handles more than a few rows (before: all 3,000 pending).
      expect(Math.max(...actualRows(plan)), JSON.stringify(plan)).toBeLessThanOrEqual(10);
    }
    expect((await runs.setControl({ target: 'all', state: 'stopped', actor: operator })).sort((a, b) => a - b)).toEqual(live);
  });
});
