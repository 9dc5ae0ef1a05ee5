/**
 * Retention (DESIGN §3): the event log is the audit trail and is kept by default. When an
 * operator sets a retention period, the steps, events and run screens of tasks that
 * finished before it are deleted; the task rows and their runs (with each run's envelope) stay. Each pass
 * that deletes anything first appends one `retention.compacted` event (a task-less event,
 * which retention never deletes): the newest row of the log is then never among the deleted,
 * so the next id (max(id) + 1) is never one a follower has already passed.
 */
import { RETENTION, RETENTION_BATCH as BATCH, compactedData } from '../retention.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { type EventWriter, prepareDeleteTaskEvents } from './rows.js';

export type Compact = (before: number, now: number, events: TaskEvent[]) => number;

export function prepareRetention(db: Db, writer: EventWriter): Compact {
  // A task still has events while its chain head is set, or while it has indexed (non-state) events.
  const finished = db.prepare<[number, number], { id: number }>(
    `SELECT id FROM tasks WHERE state IN ('completed', 'failed', 'cancelled') AND updated_at < ?
       AND (last_event_id IS NOT NULL OR EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = tasks.id AND e.prev_id IS NULL)) LIMIT ?`,
  );
  // A step's approval goes with the step (it names the step): the run's envelope keeps what was done.
  const dropApprovals = db.prepare('DELETE FROM approvals WHERE task_id = ?');
  const dropSteps = db.prepare('DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE task_id = ?)');
  const dropScreens = db.prepare('DELETE FROM run_screens WHERE run_id IN (SELECT id FROM runs WHERE task_id = ?)');
  // A task's events go all together, through its chain and the index (see rows.ts).
  const dropEvents = prepareDeleteTaskEvents(db);
  return (before, now, events) => {
    const ids = finished.all(before, BATCH).map((r) => r.id);
    if (ids.length === 0) return 0;
    // Before the deletes: see the contract above.
    events.push(writer.append(null, 'retention.compacted', RETENTION, compactedData(ids.length, before), now));
    for (const id of ids) {
      dropApprovals.run(id);
      dropSteps.run(id);
      dropScreens.run(id);
      dropEvents(id);
    }
    return ids.length;
  };
}
