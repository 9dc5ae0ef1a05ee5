/** Fenced transitions, and the two-phase stale sweep. */
import { EngineError } from '../errors.js';
import { checkMove, isAssignee, isFenced } from '../states.js';
import type { SweepResult, Task, TaskEvent, TransitionInput } from '../types.js';
import type { Db } from './connection.js';
import { type ApplyMove, reclaim } from './moves.js';
import { type TaskRow, toTask } from './rows.js';

export type Transition = (input: TransitionInput, now: number, events: TaskEvent[]) => Task;
export type Sweep = (graceMs: number, now: number, events: TaskEvent[]) => SweepResult;

export function prepareTransition(db: Db, apply: ApplyMove): Transition {
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  return (input, now, events) => {
    let row = getRow.get(input.taskId);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
    const steps = [{ to: input.to, actor: input.actor, reason: input.reason, result: input.result }, ...(input.then ?? [])];
    for (const step of steps) {
      // Fencing first: a token that is not the current one means the claim was lost,
      // whatever the actor or state now is.
      if (input.claimToken !== undefined && input.claimToken !== row.claim_token) {
        throw new EngineError(
          'STALE_CLAIM',
          `task ${row.id}: the claim token presented by ${step.actor.id} is not current (the task was reclaimed or finished)`,
          { task_id: row.id, state: row.state },
        );
      }
      if (input.claimToken === undefined && isFenced(row.state) && isAssignee(row, step.actor)) {
        throw new EngineError('VALIDATION_FAILED', `task ${row.id} is ${row.state}: its assignee must present the claim token`, {
          task_id: row.id,
        });
      }
      const verdict = checkMove(row, step.to, step.actor);
      if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id, state: row.state });
      row = apply(row, { to: step.to, actor: step.actor.id, reason: step.reason, result: step.result }, now, events);
    }
    return toTask(row);
  };
}

export function prepareSweep(db: Db, apply: ApplyMove): Sweep {
  const mark = db.prepare(
    `UPDATE tasks SET stale_since = @now
     WHERE lease_expires_at < @now AND stale_since IS NULL AND state IN ('claimed', 'in_progress')`,
  );
  const expired = db.prepare<Record<string, unknown>, TaskRow>(
    `SELECT * FROM tasks
     WHERE lease_expires_at < @now AND stale_since <= @now - @grace AND state IN ('claimed', 'in_progress')
     ORDER BY id`,
  );
  return (graceMs, now, events) => {
    // Phase 1 marks leases seen expired now; phase 2 reclaims those marked at least
    // graceMs ago that no heartbeat has renewed since (a heartbeat clears the mark).
    const result: SweepResult = { marked: mark.run({ now }).changes, requeued: [], failed: [] };
    for (const row of expired.all({ now, grace: graceMs })) {
      const to = reclaim(apply, row, 'lease expired', now, events);
      (to === 'failed' ? result.failed : result.requeued).push(row.id);
    }
    return result;
  };
}
