/**
 * The emergency stop (`stop --all`) finds its targets from the live tasks and the open runs,
 * inside the write lock: it must not read every pending task to find the few with a live run.
 */
import { describe, expect, it } from 'vitest';
import { LIVE_SQL } from '../../src/engine/sqlite/controls.js';
import type { SqliteTaskStore } from '../../src/engine/index.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { freshManager, operator } from '../helpers.js';
import { execSql, portsOf } from '../stores.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

describe('stop --all on SQLite', () => {
  it('reads the open runs, not the pending tasks, and stops every live run, a requeued one too', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const live: number[] = [];
    for (let i = 0; i < 3; i++) live.push((await tm.createTask({ title: `run ${i}`, card: CARD, priority: 9 }, operator)).task.id);
    for (let i = 0; i < 3000; i += 1000) await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `waiting ${i + j}` })), operator);
    for (let i = 0; i < 3; i++) expect((await runs.claimRun({ agent: 'd', withCard: true }, (t, now) => budgetOfTask(t.card, now)))?.task.id).toBe(live[i]);
    // A run whose task went back to pending (a parked run a stop requeued) is still live.
    await execSql(tm, "UPDATE tasks SET state = 'pending', assignee = NULL, claim_token = NULL WHERE id = $1", [live[2]]);
    const db = (tm.store as SqliteTaskStore).db;
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${LIVE_SQL}`).all() as Array<{ detail: string }>).map((r) => r.detail).join('\n');
    expect(plan).toMatch(/SCAN r USING INDEX runs_active/);
    expect(plan).toMatch(/SEARCH t USING INTEGER PRIMARY KEY/);
    // The states' index is read for the live states only (one search), never for pending.
    expect(plan.match(/USING INDEX tasks_by_state/g)?.length).toBe(1);
    expect((await runs.setControl({ target: 'all', state: 'stopped', actor: operator })).sort((a, b) => a - b)).toEqual(live);
  });
});
