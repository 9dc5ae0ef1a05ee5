/**
 * What a retention pass costs the others (found by an audit of the SQLite plans on a database
 * of 221,508 tasks and 1.3 million events, session 27). The pass looked for tasks to compact
 * inside its write transaction, reading every finished task's row until it had a batch
 * (117-182 ms with nothing to compact), every 5 s: every writer of every process waited for
 * it. The look is now a read, and a pass that finds nothing takes no write lock. Each task's
 * approvals were deleted by `task_id`, which no index holds: 10.6 ms a task at 50,000
 * approvals, now found through their steps. And a daemon runs passes less often while they
 * find nothing (retentionIdleMs).
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, type SqliteTaskStore } from '../../src/engine/index.js';
import { DROP_APPROVALS_SQL } from '../../src/engine/sqlite/retention.js';
import { startDaemon } from '../../src/workers/daemon.js';
import { retentionIdleMs } from '../../src/workers/daemon-options.js';
import { freshManager, operator, waitFor } from '../helpers.js';
import { daemonCard } from './daemon-helpers.js';

describe('a retention pass', () => {
  it('that finds nothing to compact takes no write lock: it returns while another process holds it', async () => {
    const tm = freshManager();
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    await tm.createTasks(Array.from({ length: 50 }, (_, i) => ({ title: `t${i}` })), operator);
    const other = new Database(tm.path);
    other.pragma('busy_timeout = 0');
    other.exec('BEGIN IMMEDIATE');
    try {
      const started = Date.now();
      expect(await runs.compact(Date.now() + 60_000)).toBe(0);
      // Without the look outside, the pass waits for the lock and gives up with STORE_BUSY.
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
  });

  it('deletes a task’s approvals through its steps, never by reading the whole table', () => {
    const tm = freshManager();
    const db = (tm.store as SqliteTaskStore).db;
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${DROP_APPROVALS_SQL}`).all(1) as Array<{ detail: string }>).map((r) => r.detail);
    expect(plan.join('\n')).toMatch(/SEARCH approvals USING (COVERING )?INDEX approvals_by_step/);
    expect(plan.filter((l) => /^SCAN (approvals|steps|runs)\b/.test(l))).toEqual([]);
  });

  it('runs in a daemon with --retain: a finished task’s history goes; idle passes wait a hundredth of the period, 5 s to 10 min', async () => {
    expect([1, 500_000, 60_000_000, 30 * 86_400_000].map(retentionIdleMs)).toEqual([5_000, 5_000, 600_000, 600_000]);
    expect(retentionIdleMs(3_600_000)).toBe(36_000);
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 'done soon', card: daemonCard() }, operator);
    const d = await startDaemon({ dbPath: tm.path, workers: 1, retainMs: 1, sweepCron: '* * * * * *', log: () => undefined });
    try {
      await waitFor(async () => (await tm.getTask(task.id)).state === 'completed', 10_000, 'the task to complete');
      await waitFor(async () => (await tm.getTask(task.id)).events.length === 0, 10_000, 'its history to be compacted');
    } finally {
      await d.stop();
    }
    const [run] = await createSqliteRunStore(tm.store as SqliteTaskStore).runsOf(task.id);
    expect(run!.envelope).toMatchObject({ phase: 'completed' });
  });
});
