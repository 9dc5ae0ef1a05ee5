/**
 * Retention (DESIGN §3) on PostgreSQL: the steps (with their approvals), events and run
 * screens of tasks that finished before the retention period are deleted; the task rows and their runs (with each
 * run's envelope) stay. Each pass that deletes anything first appends one
 * `retention.compacted` event (task-less, so retention never deletes it), as on SQLite.
 * There it keeps the newest id out of the deleted, since SQLite would hand out max(id) + 1
 * again; here ids come from a sequence and are never reused, but the event is written all
 * the same, so both stores log the same.
 *
 * Events are found by `task_events_by_task (task_id, id)` and deleted in one statement:
 * there is no per-task chain to walk as on SQLite.
 */
import { RETENTION, RETENTION_BATCH, compactedData } from '../retention.js';
import type { TaskEvent } from '../types.js';
import type { Query } from './connection.js';
import { appendEvent } from './moves.js';

// A finished task still has events while its head is set, or while it has events of its own
// (run.* events do not move the head). Run events can follow a task's last move.
const FINISHED = `SELECT id FROM tasks
  WHERE state IN ('completed', 'failed', 'cancelled') AND updated_at < $1
    AND (last_event_id IS NOT NULL OR EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = tasks.id))
  ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`;

export const pgRetention = {
  /** Deletes the steps, screens and events of up to RETENTION_BATCH tasks finished before `before`; returns how many. */
  async compact(q: Query, before: number, now: number, events: TaskEvent[]): Promise<number> {
    // Locked, so two compactors take different tasks (the second skips the first's rows).
    // A row whose compaction committed while this statement ran is re-checked on its new
    // version (head cleared) but its EXISTS still sees the snapshot's events: the second
    // statement, with a snapshot of its own, drops the tasks that have nothing left.
    const locked = (await q<{ id: number }>(FINISHED, [before, RETENTION_BATCH])).map((r) => r.id);
    if (locked.length === 0) return 0;
    const ids = (
      await q<{ id: number }>(
        `SELECT id FROM tasks WHERE id = ANY($1::bigint[])
           AND (last_event_id IS NOT NULL OR EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = tasks.id)) ORDER BY id`,
        [locked],
      )
    ).map((r) => r.id);
    if (ids.length === 0) return 0;
    // Before the deletes, as on SQLite (see the module comment).
    events.push(await appendEvent(q, null, 'retention.compacted', RETENTION, compactedData(ids.length, before), now));
    // A step's approval goes with the step (it names the step): the run's envelope keeps what was done.
    // Through their steps (approvals_by_step): approvals has no index by task.
    await q('DELETE FROM approvals WHERE step_id IN (SELECT s.id FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.task_id = ANY($1::bigint[]))', [ids]);
    await q('DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE task_id = ANY($1::bigint[]))', [ids]);
    await q('DELETE FROM run_screens WHERE run_id IN (SELECT id FROM runs WHERE task_id = ANY($1::bigint[]))', [ids]);
    await q('DELETE FROM task_events WHERE task_id = ANY($1::bigint[])', [ids]);
    await q('UPDATE tasks SET last_event_id = NULL WHERE id = ANY($1::bigint[]) AND last_event_id IS NOT NULL', [ids]);
    return ids.length;
  },
};
