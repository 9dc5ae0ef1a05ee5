/**
 * Reading one task's events costs what the task has, not what the log has. The chain read
 * joined task_events to the chain with a plain JOIN, and given `e.id > @after` SQLite's
 * planner scanned the whole log past the cursor — every task's events — probing the chain
 * for each row: `task show`, task_get, `GET /api/tasks/:id` and a task's event stream took
 * 31.7–40 ms for a one-event task in a 200,000-event log (0.1 ms now). The plan is checked
 * on a log where the bad one is the planner's pick, and the reads against the whole log.
 */
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { CHAIN_AFTER_SQL, CHAIN_BEFORE_SQL } from '../../src/engine/sqlite/reads.js';
import { operator, tempDir } from '../helpers.js';

const plan = (db: Database.Database, sql: string, params: Record<string, number>) =>
  (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(params) as Array<{ detail: string }>).map((r) => r.detail);

describe('a task’s events', () => {
  it('are read by walking its chain and looking up each event by id, never by a range of the log', async () => {
    const path = join(tempDir(), 'log.db');
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    const first = (await tm.createTask({ title: 'first' }, operator)).task;
    await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `other ${i}` })), operator);
    const claimed = (await tm.claimTask({ agent: 'a', taskId: first.id }))!;
    await tm.transitionTask({ taskId: first.id, to: 'in_progress', actor: { id: 'a', role: 'agent' }, claimToken: claimed.claimToken });
    await tm.close();

    const db = new Database(path, { readonly: true });
    try {
      for (const [sql, params] of [
        [CHAIN_AFTER_SQL, { task: first.id, after: 0 }],
        [CHAIN_BEFORE_SQL, { task: first.id, before: Number.MAX_SAFE_INTEGER, last: 50 }],
      ] as const) {
        const lines = plan(db, sql, params);
        const onEvents = lines.filter((l) => /\b(task_events|e)\b/.test(l) && /^(SEARCH|SCAN)/.test(l));
        expect(onEvents.length, lines.join('\n')).toBeGreaterThan(0);
        expect(onEvents.filter((l) => !/USING INTEGER PRIMARY KEY \(rowid=\?\)/.test(l)), lines.join('\n')).toEqual([]);
        const ids = (db.prepare(sql).all(params) as Array<{ id: number }>).map((r) => r.id).sort((a, b) => a - b);
        const expected = (db.prepare('SELECT id FROM task_events WHERE task_id = ? AND prev_id IS NOT NULL ORDER BY id').all(first.id) as Array<{ id: number }>).map((r) => r.id);
        expect(ids).toEqual(expected);
        expect(ids).toHaveLength(3);
      }
    } finally {
      db.close();
    }
  });
});
