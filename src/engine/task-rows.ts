/**
 * The task and event rows as both adapters store them, and the pure rules over them that do
 * not depend on a database: the row a move leaves, the engine types a row maps to. JSON
 * columns (card, result, requires, depends_on, event data) are JSON text in both stores, so
 * one mapping serves both.
 */
import { type ReadSubject, assertReadable, mayRead } from './authority.js';
import { EngineError } from './errors.js';
import { checkMove, isAssignee, isFenced } from './states.js';
import type { Actor, ActorRole, Card, Task, TaskEvent, TaskState } from './types.js';

export interface TaskRow {
  id: number;
  title: string;
  state: TaskState;
  priority: number;
  creator: string;
  creator_role: ActorRole;
  assignee: string | null;
  claim_token: string | null;
  worker_id: string | null;
  attempts: number;
  max_attempts: number;
  queue: string;
  for_agent: string | null;
  requires: string | null;
  depends_on: string | null;
  idempotency_key: string | null;
  run_after: number;
  unmet_deps: number;
  lease_ms: number | null;
  lease_expires_at: number | null;
  stale_since: number | null;
  created_at: number;
  updated_at: number;
  card: string;
  result: string | null;
  /** The newest of the task's own events (the head of its chain, see the migration). */
  last_event_id: number | null;
}

export interface EventRow {
  id: number;
  task_id: number | null;
  type: string;
  actor: string;
  actor_role: ActorRole;
  data: string;
  created_at: number;
}

/** The columns of TaskRow, in order (SQLite's raw-mode statements map them by position). */
export const TASK_COLUMNS =
  'id, title, state, priority, creator, assignee, claim_token, worker_id, attempts, max_attempts, queue, for_agent, ' +
  'requires, depends_on, idempotency_key, run_after, unmet_deps, lease_ms, lease_expires_at, stale_since, created_at, ' +
  'updated_at, card, result, creator_role, last_event_id';

/** The same for a listing (FindTasksQuery.summary): the card read as `{}`, the result as null. Both stores. */
export const SUMMARY_COLUMNS = TASK_COLUMNS.replace('card, result', "'{}' AS card, NULL AS result");

export function toTask(row: TaskRow): Task {
  return {
    id: row.id,
    title: row.title,
    state: row.state,
    priority: row.priority,
    creator: row.creator,
    creatorRole: row.creator_role,
    assignee: row.assignee,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    dependsOn: row.depends_on === null ? [] : (JSON.parse(row.depends_on) as number[]),
    queue: row.queue,
    forAgent: row.for_agent,
    requires: row.requires === null ? [] : (JSON.parse(row.requires) as string[]),
    idempotencyKey: row.idempotency_key,
    runAfter: row.run_after,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    leaseExpiresAt: row.lease_expires_at,
    card: JSON.parse(row.card) as Card,
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
  };
}

export function toEvent(row: EventRow): TaskEvent {
  return {
    id: row.id,
    taskId: row.task_id,
    type: row.type,
    actor: row.actor,
    actorRole: row.actor_role,
    data: JSON.parse(row.data) as Record<string, unknown>,
    createdAt: row.created_at,
  };
}

/** The row after a move to `to`: the columns the move resets; everything else is kept. */
export function movedRow(row: TaskRow, to: TaskState, now: number, result: string | null): TaskRow {
  let assignee = row.assignee;
  let claimToken = row.claim_token;
  let workerId: string | null = null;
  let leaseExpiresAt: number | null = null;
  if (to === 'pending') {
    assignee = null;
    claimToken = null;
  } else if (to === 'in_progress' || to === 'claimed') {
    workerId = row.worker_id;
    leaseExpiresAt = now + (row.lease_ms ?? 30_000);
  } else if (to !== 'waiting' && to !== 'review') {
    // waiting and review release the lease; the assignee stays on record (and, for review,
    // keeps its token so a reviewer's rework request hands the task back to the same claim).
    claimToken = null;
  }
  return {
    id: row.id,
    title: row.title,
    state: to,
    priority: row.priority,
    creator: row.creator,
    assignee,
    claim_token: claimToken,
    worker_id: workerId,
    attempts: row.attempts,
    max_attempts: row.max_attempts,
    queue: row.queue,
    for_agent: row.for_agent,
    requires: row.requires,
    depends_on: row.depends_on,
    idempotency_key: row.idempotency_key,
    run_after: row.run_after,
    unmet_deps: row.unmet_deps,
    lease_ms: row.lease_ms,
    lease_expires_at: leaseExpiresAt,
    stale_since: null,
    created_at: row.created_at,
    updated_at: now,
    card: row.card,
    // Back in the queue, a task has no result: what a run left there (a parked run's
    // envelope, with its calls' arguments) is its runs' record, not something every agent
    // that may claim the task should read.
    result: to === 'pending' ? null : result,
    creator_role: row.creator_role,
    last_event_id: row.last_event_id,
  };
}

export interface MoveSpec {
  to: TaskState;
  actor: Actor;
  /** Event type; `task.transitioned` unless the move is a cancel or a sweep. */
  type?: string;
  reason?: string;
  /** Stored as the task's result when defined. */
  result?: unknown;
  data?: Record<string, unknown>;
}

/**
 * One move checked by the state machine (refused with its code, writing nothing) and what
 * it makes: the row as it will be, and its event (id 0 until written).
 */
export function stageMove(row: TaskRow, spec: MoveSpec, now: number): { next: TaskRow; event: TaskEvent } {
  const verdict = checkMove({ id: row.id, state: row.state, creator: row.creator, creatorRole: row.creator_role, assignee: row.assignee }, spec.to, spec.actor);
  if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id, state: row.state });
  const next = movedRow(row, spec.to, now, spec.result !== undefined ? JSON.stringify(spec.result) : row.result);
  const type = spec.type ?? (spec.to === 'cancelled' ? 'task.cancelled' : 'task.transitioned');
  const data: Record<string, unknown> = { from: row.state, to: spec.to, ...spec.data };
  if (spec.reason !== undefined) data.reason = spec.reason;
  return { next, event: { id: 0, taskId: row.id, type, actor: spec.actor.id, actorRole: spec.actor.role, data, createdAt: now } };
}

/** Where a reclaimed task goes (lease ran out, daemon died): back to pending, or failed on its last attempt. */
export function reclaimSpec(row: TaskRow, reason: string): MoveSpec {
  const exhausted = row.attempts >= row.max_attempts;
  return {
    to: exhausted ? 'failed' : 'pending',
    actor: { id: 'sweeper', role: 'system' },
    type: 'task.stale_reclaimed',
    reason: exhausted ? `${reason} on attempt ${row.attempts} of ${row.max_attempts}` : reason,
    data: { attempt: row.attempts, previous_assignee: row.assignee },
  };
}

/**
 * Who may make a transition step, before the state machine is asked: the fence (a token
 * that is not the current one means the claim was lost, whatever the actor or state now
 * is; an assignee moving a fenced task must show it), then reading (authority.ts): an agent
 * that may not read the task learns nothing of it from the refusal, not even its state
 * (the state machine's own refusal would say "completed" or "cannot move from review").
 * Every actor a move allows may read its task, so the second check refuses only those the
 * state machine would refuse anyway; it costs no read: the row is the one the move reads.
 */
export function checkStepActor(row: TaskRow, claimToken: string | undefined, actor: Actor): void {
  const readable = mayRead(actor, readSubject(row));
  if (claimToken !== undefined && claimToken !== row.claim_token) {
    throw new EngineError(
      'STALE_CLAIM',
      `task ${row.id}: the claim token presented by ${actor.id} is not current (the task was reclaimed or finished)`,
      readable ? { task_id: row.id, state: row.state } : { task_id: row.id },
    );
  }
  if (!readable) assertReadable(actor, readSubject(row));
  if (claimToken === undefined && isFenced(row.state) && isAssignee(row, actor)) {
    throw new EngineError('VALIDATION_FAILED', `task ${row.id} is ${row.state}: its assignee must present the claim token`, { task_id: row.id });
  }
}

/** What the reading rule (authority.ts mayRead) needs of a row. */
export const readSubject = (row: Pick<TaskRow, 'id' | 'creator' | 'creator_role' | 'assignee' | 'state' | 'for_agent'>): ReadSubject => ({
  id: row.id,
  creator: row.creator,
  creatorRole: row.creator_role,
  assignee: row.assignee,
  state: row.state,
  forAgent: row.for_agent,
});

/** Why a heartbeat that matched no lease was refused, from the task as it is. */
export function heartbeatRefusal(taskId: number, agent: string, row: TaskRow | undefined): EngineError {
  if (row === undefined) return new EngineError('TASK_NOT_FOUND', `task ${taskId} does not exist`, { task_id: taskId });
  // To an agent that may not read the task, the one answer that says nothing of its state.
  if (!isFenced(row.state) && mayRead({ id: agent, role: 'agent' }, readSubject(row))) {
    return new EngineError('INVALID_TRANSITION', `task ${taskId} is ${row.state} and holds no lease to extend`, { task_id: taskId });
  }
  return new EngineError('STALE_CLAIM', `task ${taskId}: claim token of ${agent} is not current; the task was reclaimed`, { task_id: taskId });
}

/** What a dependency's check reads of its row. */
export type DependencyRow = Pick<TaskRow, 'state' | 'creator' | 'creator_role' | 'assignee' | 'for_agent'>;

/**
 * Why `creator`'s new task may not depend on `dep` (undefined: no such task), or null when it
 * may. A task its creator may not read is refused first, whatever its state: its refusal
 * (or the dependent's fate) would tell the creator that state.
 */
export function dependencyRefusal(dep: number, row: DependencyRow | undefined, creator: Actor): EngineError | null {
  if (row === undefined) return new EngineError('TASK_NOT_FOUND', `dependency ${dep} does not exist`, { task_id: dep });
  if (!mayRead(creator, readSubject({ ...row, id: dep }))) {
    return new EngineError('FORBIDDEN', `dependency ${dep} is not yours to read: ${creator.role} ${creator.id} did not create it, does not hold it and may not claim it`, { task_id: dep });
  }
  const state = row.state;
  if (state === 'failed' || state === 'cancelled') {
    return new EngineError('VALIDATION_FAILED', `dependency ${dep} is ${state}; a new task cannot wait for it`, { task_id: dep });
  }
  return null;
}
