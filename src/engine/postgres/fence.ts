/**
 * The fence of a loop write on PostgreSQL: the task's row is locked for the transaction,
 * then its claim is checked as SQLite's runs module does (same codes and messages). The lock
 * is what SQLite's single writer gave for free: a reclaim, a move or another write of the
 * same run waits for this transaction, so the claim checked here holds until the commit,
 * and the writers of one run are serialized (a step's `max(seq) + 1` is safe under it).
 */
import { EngineError } from '../errors.js';
import type { Fence } from '../runs.js';
import { isFenced } from '../states.js';
import type { TaskRow } from '../task-rows.js';
import type { Query } from './connection.js';
import { lockTask, takePrimed } from './moves.js';

function staleClaim(f: Fence, state: string): EngineError {
  return new EngineError('STALE_CLAIM', `task ${f.taskId}: the claim of ${f.agent} is no longer current (task is ${state})`, { task_id: f.taskId });
}

function notFound(f: Fence): EngineError {
  return new EngineError('TASK_NOT_FOUND', `task ${f.taskId} does not exist`, { task_id: f.taskId });
}

/** Locks the task and checks the claim; returns the locked row, for a write that moves the task. */
export async function fenceTask(q: Query, f: Fence): Promise<TaskRow> {
  const row = await lockTask(q, f.taskId);
  if (row === undefined) throw notFound(f);
  if (row.claim_token !== f.claimToken || !isFenced(row.state)) throw staleClaim(f, row.state);
  return row;
}

/** The fence of a step write: the same lock, but only the claim is read (the card can be large). */
export async function fenceClaim(q: Query, f: Fence): Promise<void> {
  const p = takePrimed(q, f.taskId, false);
  const [row] = p !== undefined ? [p.row as { state: TaskRow['state']; claim_token: string | null } | undefined] : await q<{ state: TaskRow['state']; claim_token: string | null }>('SELECT state, claim_token FROM tasks WHERE id = $1 FOR UPDATE', [f.taskId]);
  if (row === undefined) throw notFound(f);
  if (row.claim_token !== f.claimToken || !isFenced(row.state)) throw staleClaim(f, row.state);
}
