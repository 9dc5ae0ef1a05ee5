/** Fenced transitions, and the two-phase stale sweep. */
import { EngineError } from '../errors.js';
import { checkStepActor } from '../task-rows.js';
import { SWEEP_BATCH, type SweepBatch, type SweepCursor, asTasksOwn } from '../sweeps.js';
import type { Task, TaskEvent, TransitionInput } from '../types.js';
import type { Db } from './connection.js';
import { type ApplyMove, moveParts, noMovesStaged, reclaim } from './moves.js';
import { TASK_COLUMN_COUNT, TASK_COLUMNS, type TaskRow, rowOf, toTask } from './rows.js';

export type Transition = (input: TransitionInput, now: number, events: TaskEvent[]) => Task;
/** One batch of the sweep (sweeps.ts): up to SWEEP_BATCH expired tasks from the cursor on, none of `skip`. */
export type Sweep = (graceMs: number, now: number, events: TaskEvent[], at: SweepCursor, skip: readonly number[]) => SweepBatch;

export function prepareTransition(db: Db, apply: ApplyMove): Transition {
  // The row, and whether any task depends on it (a completion releases those), in one read.
  const getRow = db
    .prepare<[number], unknown[]>(
      `SELECT ${TASK_COLUMNS}, EXISTS (SELECT 1 FROM task_deps WHERE depends_on = tasks.id) FROM tasks WHERE id = ?`,
    )
    .raw(true);
  const parts = moveParts(apply);
  // Every step is checked against the row as the previous step left it; the steps' events
  // are appended in order, and the row is written once, in its final state (see MoveParts).
  const stage = parts?.stage ?? apply;
  const commit = parts?.commit ?? ((row: TaskRow) => row);
  return (input, now, events) => {
    const raw = getRow.get(input.taskId);
    if (raw === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
    let row = rowOf(raw);
    const staged = noMovesStaged();
    staged.head = row.last_event_id ?? 0; // read just now, in this transaction
    staged.hasDependents = raw[TASK_COLUMN_COUNT] === 1;
    const steps = [{ to: input.to, actor: input.actor, reason: input.reason, result: input.result }, ...(input.then ?? [])];
    for (const step of steps) {
      // Fencing and reading first (task-rows.ts): a lost claim, or a task the actor may not read.
      checkStepActor(row, input.claimToken, step.actor);
      // stage asks the state machine (see moves.ts).
      row = stage(row, { to: step.to, actor: step.actor, reason: step.reason, result: step.result }, now, events, staged);
    }
    return toTask(commit(row, now, events, staged));
  };
}

export function prepareSweep(db: Db, apply: ApplyMove): Sweep {
  const mark = db.prepare(
    `UPDATE tasks SET stale_since = @now
     WHERE lease_expires_at < @now AND stale_since IS NULL AND state IN ('claimed', 'in_progress')`,
  );
  // Both statements reach the leased tasks through tasks_by_state: only claimed and
  // in_progress tasks hold a lease, and there are few of them (one per busy worker) unless
  // an agent claimed many and stopped. A batch reads one state's range from its cursor on.
  const expired = db
    .prepare<Record<string, unknown>, unknown[]>(
      `SELECT ${TASK_COLUMNS} FROM tasks
       WHERE state = @state AND id > @after AND lease_expires_at < @now AND stale_since <= @now - @grace
         AND id NOT IN (SELECT value FROM json_each(@skip))
       ORDER BY id LIMIT ${SWEEP_BATCH}`,
    )
    .raw(true);
  return (graceMs, now, events, at, skip) => {
    // Phase 1 marks leases seen expired now; phase 2 reclaims those marked at least
    // graceMs ago that no heartbeat has renewed since (a heartbeat clears the mark).
    const marked = at.mark ? mark.run({ now }).changes : 0;
    const rows = expired.all({ now, grace: graceMs, state: at.state, after: at.after, skip: JSON.stringify(skip) }).map(rowOf);
    const batch: SweepBatch = { marked, requeued: [], failed: [], read: rows.length, last: rows.at(-1)?.id ?? at.after };
    for (const row of rows) {
      const to = asTasksOwn(row.id, () => reclaim(apply, row, 'lease expired', now, events));
      (to === 'failed' ? batch.failed : batch.requeued).push(row.id);
    }
    return batch;
  };
}
