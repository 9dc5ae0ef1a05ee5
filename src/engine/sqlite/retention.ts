/**
 * Retention (DESIGN §3): the event log is the audit trail and is kept by default. When an
 * operator sets a retention period, the steps and events of tasks that finished before it
 * are deleted; the task rows and their runs (with each run's envelope) stay. Each pass
 * appends one `retention.compacted` event, so the newest event id always survives and ids
 * are never reused.
 */
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import type { EventWriter } from './rows.js';

export type Compact = (before: number, now: number, events: TaskEvent[]) => number;

const BATCH = 500;

export function prepareRetention(db: Db, writer: EventWriter): Compact {
  const finished = db.prepare<[number, number], { id: number }>(
    `SELECT id FROM tasks WHERE state IN ('completed', 'failed', 'cancelled') AND updated_at < ?
       AND EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = tasks.id) LIMIT ?`,
  );
  const dropSteps = db.prepare('DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE task_id = ?)');
  const dropEvents = db.prepare('DELETE FROM task_events WHERE task_id = ?');
  return (before, now, events) => {
    const ids = finished.all(before, BATCH).map((r) => r.id);
    for (const id of ids) {
      dropSteps.run(id);
      dropEvents.run(id);
    }
    if (ids.length > 0) {
      events.push(writer.append(null, 'retention.compacted', 'retention', { tasks: ids.length, finished_before: new Date(before).toISOString() }, now));
    }
    return ids.length;
  };
}
