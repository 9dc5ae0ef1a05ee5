/**
 * The task state machine: the only place that knows which moves exist and who may make
 * them. Pure: no I/O, no clock.
 *
 * How "nothing writes `state` beside it" is guaranteed: in the SQLite adapter a task's state
 * is written by exactly two statements families — the claim's (claim.ts, which asks
 * `checkClaim`) and the move's (moves.ts, whose `stage` asks `checkMove` for every move,
 * system moves included: sweeps, approvals, controls, releases, run endings, cascades).
 * test/engine/authority.test.ts fails if any other adapter file assigns tasks.state.
 */
import type { Actor, ActorRole, TaskState } from './types.js';
import { TASK_STATES, TERMINAL_STATES } from './types.js';
import type { ErrorCode } from './errors.js';

/**
 * Who may make a move.
 * - `claimer`: any agent, and only through a claim (which issues the claim token).
 * - `assignee`: the agent holding the claim (fenced by its claim token).
 * - `creator`: whoever created the task.
 * - `operator`: a human operator (the CLI's default identity).
 * - `reviewer`: a person who decides reviews (and approvals), nothing else.
 * - `system`: the engine itself: stale sweep, acceptance runner, restart policy, approvals.
 */
export type Mover = 'claimer' | 'assignee' | 'creator' | 'operator' | 'reviewer' | 'system';

const CANCEL: readonly Mover[] = ['creator', 'operator', 'system'];
const VERDICT: readonly Mover[] = ['creator', 'operator', 'reviewer', 'system'];

/**
 * DESIGN §3. Two moves are added for the stale sweep only: `claimed → failed` and
 * `in_progress → failed` by `system`, used when a lease runs out on the last attempt.
 */
export const TRANSITIONS: Readonly<Record<TaskState, Readonly<Partial<Record<TaskState, readonly Mover[]>>>>> = {
  pending: { claimed: ['claimer'], cancelled: CANCEL },
  claimed: {
    in_progress: ['assignee'],
    pending: ['assignee', 'system'],
    failed: ['system'],
    cancelled: CANCEL,
  },
  in_progress: {
    review: ['assignee'],
    waiting: ['assignee'],
    failed: ['assignee', 'system'],
    pending: ['system'],
    cancelled: CANCEL,
  },
  waiting: { pending: ['operator', 'system'], failed: ['operator', 'system'], cancelled: CANCEL },
  review: { completed: VERDICT, failed: VERDICT, in_progress: VERDICT, cancelled: CANCEL },
  completed: {},
  failed: {},
  cancelled: {},
};

export interface MoveSubject {
  id: number;
  state: TaskState;
  creator: string;
  /** The creator is (creator, creatorRole): an agent named like an operator is not one. */
  creatorRole: ActorRole;
  /** Always an agent: only agents claim. */
  assignee: string | null;
}

export type MoveVerdict = { ok: true } | { ok: false; code: ErrorCode; message: string };

export function isTaskState(value: unknown): value is TaskState {
  return typeof value === 'string' && (TASK_STATES as readonly string[]).includes(value);
}

export function isTerminal(state: TaskState): boolean {
  return TERMINAL_STATES.has(state);
}

export function allowedTargets(from: TaskState): TaskState[] {
  return Object.keys(TRANSITIONS[from]) as TaskState[];
}

/** True when the actor is the task's assignee, so its writes must carry the claim token. */
export function isAssignee(task: { assignee: string | null }, actor: Actor): boolean {
  return actor.role === 'agent' && task.assignee !== null && actor.id === task.assignee;
}

/** Fenced states: a write by the assignee must present the current claim token. */
export function isFenced(state: TaskState): boolean {
  return state === 'claimed' || state === 'in_progress';
}

function fits(mover: Mover, task: MoveSubject, actor: Actor): boolean {
  switch (mover) {
    case 'claimer':
      return actor.role === 'agent';
    case 'assignee':
      return isAssignee(task, actor);
    case 'creator':
      return actor.id === task.creator && actor.role === task.creatorRole && actor.role !== 'system';
    case 'operator':
      return actor.role === 'operator';
    case 'reviewer':
      return actor.role === 'reviewer';
    case 'system':
      return actor.role === 'system';
  }
}

/** Decides whether `actor` may move `task` to `to`. Claims go through `claim`, not here. */
export function checkMove(task: MoveSubject, to: TaskState, actor: Actor): MoveVerdict {
  const movers = TRANSITIONS[task.state][to];
  if (movers === undefined) {
    const allowed = allowedTargets(task.state);
    return {
      ok: false,
      code: 'INVALID_TRANSITION',
      message:
        `task ${task.id} cannot move from ${task.state} to ${to}; ` +
        (allowed.length === 0 ? `${task.state} is terminal` : `allowed: ${allowed.join(', ')}`),
    };
  }
  if (movers.includes('claimer')) {
    return { ok: false, code: 'INVALID_TRANSITION', message: `task ${task.id}: use claim to move a task to claimed` };
  }
  // Completion is someone else's verdict: the assignee never decides a review, even as creator.
  if (task.state === 'review' && isAssignee(task, actor)) {
    return {
      ok: false,
      code: 'FORBIDDEN',
      message: `task ${task.id}: ${actor.id} is the assignee and may not decide its review (creator, operator or acceptance runner only)`,
    };
  }
  if (!movers.some((m) => fits(m, task, actor))) {
    return {
      ok: false,
      code: 'FORBIDDEN',
      message: `task ${task.id}: ${actor.role} ${actor.id} may not move it from ${task.state} to ${to} (allowed: ${movers.join(', ')})`,
    };
  }
  return { ok: true };
}

/** Decides whether `actor` may claim `task` (the one move `checkMove` leaves to the claim). */
export function checkClaim(task: MoveSubject, actor: Actor): MoveVerdict {
  if (task.state !== 'pending') {
    return { ok: false, code: 'INVALID_TRANSITION', message: `task ${task.id} is ${task.state}; only a pending task can be claimed` };
  }
  const movers = TRANSITIONS.pending.claimed ?? [];
  if (!movers.some((m) => fits(m, task, actor))) {
    return { ok: false, code: 'FORBIDDEN', message: `task ${task.id}: ${actor.role} ${actor.id} may not claim it (only agents claim)` };
  }
  return { ok: true };
}
