/**
 * Applying a move that states.ts has allowed: the row update, its event, and what the
 * move means for dependents. Shared by transitions and the stale sweep, always inside
 * the caller's transaction.
 */
import { isTerminal } from '../states.js';
import type { TaskEvent, TaskState } from '../types.js';
import type { Db } from './connection.js';
import type { EventWriter, TaskRow } from './rows.js';

export interface MoveSpec {
  to: TaskState;
  actor: string;
  /** Event type; `task.transitioned` unless the move is a cancel or a sweep. */
  type?: string;
  reason?: string;
  /** Stored as the task's result when defined. */
  result?: unknown;
  data?: Record<string, unknown>;
}

export type ApplyMove = (row: TaskRow, spec: MoveSpec, now: number, events: TaskEvent[]) => TaskRow;

/** The columns a move to `to` resets; everything else is kept. */
function nextFields(row: TaskRow, to: TaskState, now: number) {
  if (to === 'pending') return { assignee: null, claim_token: null, worker_id: null, lease_expires_at: null };
  if (to === 'in_progress' || to === 'claimed') {
    return {
      assignee: row.assignee,
      claim_token: row.claim_token,
      worker_id: row.worker_id,
      lease_expires_at: now + (row.lease_ms ?? 30_000),
    };
  }
  // waiting and review release the lease; the assignee stays on record (and, for review,
  // keeps its token so a reviewer's rework request hands the task back to the same claim).
  if (to === 'waiting' || to === 'review') {
    return { assignee: row.assignee, claim_token: row.claim_token, worker_id: null, lease_expires_at: null };
  }
  return { assignee: row.assignee, claim_token: null, worker_id: null, lease_expires_at: null };
}

export function prepareMoves(db: Db, writer: EventWriter): ApplyMove {
  const update = db.prepare<Record<string, unknown>, TaskRow>(
    `UPDATE tasks SET state = @state, assignee = @assignee, claim_token = @claim_token, worker_id = @worker_id,
       lease_expires_at = @lease_expires_at, stale_since = NULL, updated_at = @now,
       result = CASE WHEN @has_result THEN @result ELSE result END
     WHERE id = @id RETURNING *`,
  );
  const release = db.prepare('UPDATE tasks SET unmet_deps = unmet_deps - 1 WHERE id IN (SELECT task_id FROM task_deps WHERE depends_on = ?)');
  const dependents = db.prepare<[number], TaskRow>(
    `SELECT t.* FROM task_deps d JOIN tasks t ON t.id = d.task_id
     WHERE d.depends_on = ? AND t.state NOT IN ('completed', 'failed', 'cancelled')`,
  );

  const apply: ApplyMove = (row, spec, now, events) => {
    const hasResult = spec.result !== undefined;
    const next = update.get({
      id: row.id,
      state: spec.to,
      ...nextFields(row, spec.to, now),
      now,
      has_result: hasResult ? 1 : 0,
      result: hasResult ? JSON.stringify(spec.result) : null,
    })!;
    const type = spec.type ?? (spec.to === 'cancelled' ? 'task.cancelled' : 'task.transitioned');
    const data: Record<string, unknown> = { from: row.state, to: spec.to, ...spec.data };
    if (spec.reason !== undefined) data.reason = spec.reason;
    events.push(writer.append(row.id, type, spec.actor, data, now));

    if (spec.to === 'completed') {
      release.run(row.id);
    } else if (isTerminal(spec.to)) {
      // A dependency that can never complete: its dependents can never run, so they are
      // cancelled now (recursively) rather than left pending forever.
      for (const dep of dependents.all(row.id)) {
        apply(dep, { to: 'cancelled', actor: 'system', reason: `dependency ${row.id} ended ${spec.to}` }, now, events);
      }
    }
    return next;
  };
  return apply;
}

/**
 * Takes a task away from a claim that is gone (lease ran out, daemon died): back to
 * pending, or failed when its last attempt was spent. Returns where it went.
 */
export function reclaim(apply: ApplyMove, row: TaskRow, reason: string, now: number, events: TaskEvent[]): 'pending' | 'failed' {
  const exhausted = row.attempts >= row.max_attempts;
  const to = exhausted ? 'failed' : 'pending';
  apply(row, {
    to,
    actor: 'sweeper',
    type: 'task.stale_reclaimed',
    reason: exhausted ? `${reason} on attempt ${row.attempts} of ${row.max_attempts}` : reason,
    data: { attempt: row.attempts, previous_assignee: row.assignee },
  }, now, events);
  return to;
}
