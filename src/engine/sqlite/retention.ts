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

/** The tasks a pass would compact (a read, outside any write): up to RETENTION_BATCH ids. */
export type RetentionLook = (before: number) => number[];
/** Compacts those of `ids` that still qualify, in the caller's write transaction; returns how many. */
export type Compact = (ids: number[], before: number, now: number, events: TaskEvent[]) => number;

// A task still has events while its chain head is set, or while it has indexed (non-state) events.
const HAS_HISTORY = `(last_event_id IS NOT NULL OR EXISTS (SELECT 1 FROM task_events e WHERE e.task_id = tasks.id AND e.prev_id IS NULL))`;
const QUALIFIES = `state IN ('completed', 'failed', 'cancelled') AND updated_at < ? AND ${HAS_HISTORY}`;

/**
 * The look reads every finished task's row until it has a batch: with 181,000 completed tasks
 * and nothing to compact, 117-182 ms. It ran inside the pass's write transaction, every 5 s,
 * so every writer of every process waited for it; now it is a read, and a pass that finds
 * nothing takes no write lock at all. (The daemon also runs passes less often while they
 * find nothing: daemon.ts.)
 */
export function prepareRetentionLook(db: Db): RetentionLook {
  const finished = db.prepare<[number, number], number>(`SELECT id FROM tasks WHERE ${QUALIFIES} LIMIT ?`).pluck(true);
  return (before) => finished.all(before, BATCH);
}

/** A task's approvals, found through its steps (see prepareRetention). */
export const DROP_APPROVALS_SQL = 'DELETE FROM approvals WHERE step_id IN (SELECT s.id FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.task_id = ?)';

export function prepareRetention(db: Db, writer: EventWriter): Compact {
  // Each id is checked again in the write: another process may have compacted it since the look.
  const stillQualifies = db.prepare<[number, number], number>(`SELECT id FROM tasks WHERE id = ? AND ${QUALIFIES}`).pluck(true);
  // A step's approval goes with the step (it names the step): the run's envelope keeps what was
  // done. Found through its step (approvals_by_step): approvals has no index by task, and
  // `WHERE task_id = ?` read the whole table once per task, 10.6 ms each at 50,000 approvals.
  const dropApprovals = db.prepare(DROP_APPROVALS_SQL);
  const dropSteps = db.prepare('DELETE FROM steps WHERE run_id IN (SELECT id FROM runs WHERE task_id = ?)');
  const dropScreens = db.prepare('DELETE FROM run_screens WHERE run_id IN (SELECT id FROM runs WHERE task_id = ?)');
  // A task's events go all together, through its chain and the index (see rows.ts).
  const dropEvents = prepareDeleteTaskEvents(db);
  return (looked, before, now, events) => {
    const ids = looked.filter((id) => stillQualifies.get(id, before) !== undefined);
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
