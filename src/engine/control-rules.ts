/**
 * The rules of a stop, pause or resume request, one place for both adapters: who may send
 * it (authority.ts mayControl), who may lift a pause, and what it does to one task given the
 * control stored for it. The adapters read (and lock) the rows and carry out what this says.
 */
import { type AuthoritySubject, mayControl } from './authority.js';
import { EngineError } from './errors.js';
import type { ControlRequest } from './run-store.js';
import type { ControlState } from './runs.js';
import { isTerminal } from './states.js';
import type { TaskRow } from './task-rows.js';
import type { TaskState } from './types.js';

/** What a request does to one task. */
export type ControlStep =
  /** Nothing: a resume of `all` passing a run that is not paused, a pause of a stopped run. */
  | { kind: 'skip' }
  /** The control row goes, `run.resume_requested`. */
  | { kind: 'resume' }
  /** The control row says paused, `run.pause_requested`. */
  | { kind: 'pause' }
  /** Nothing ever ran: the task is cancelled and its control row goes. */
  | { kind: 'cancel' }
  /** The control row says stopped, `run.stop_requested`; a parked run's task goes back to pending so a worker ends it. */
  | { kind: 'stop'; requeue: boolean };

export interface ControlledTask extends AuthoritySubject {
  state: TaskState;
}

/** The reason a request records when it names none. */
export function controlReason(request: ControlRequest): string {
  return request.reason ?? (request.state === 'stopped' ? 'user_stop' : request.state === 'paused' ? 'user_pause' : 'user_resume');
}

/**
 * What `request` does to `task`, whose stored control is `control` (undefined: running).
 * `neverRan` is asked only for a stop of a pending task (whether it has no open run).
 * Throws FORBIDDEN or INVALID_TRANSITION, before anything is written for this task.
 */
export function controlStep(
  request: ControlRequest,
  task: ControlledTask,
  control: { state: ControlState; set_by_role: string | null } | undefined,
  neverRan: boolean | undefined,
): ControlStep {
  const { actor, state } = request;
  const verdict = mayControl(actor, task);
  if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: task.id });
  const current = control?.state ?? 'running';
  if (state === 'running') {
    if (current !== 'paused') {
      if (request.target === 'all') return { kind: 'skip' };
      throw new EngineError('INVALID_TRANSITION', `task ${task.id} is not paused (control: ${current})`, { task_id: task.id });
    }
    // A pause is lifted by its own authority or a higher one: an operator's pause is the operator's to lift.
    if (!outranks(actor.role, control?.set_by_role ?? 'agent')) {
      throw new EngineError('FORBIDDEN', `task ${task.id}: paused by the ${control?.set_by_role}, so only an operator may resume it (${actor.role} ${actor.id} may not)`, { task_id: task.id });
    }
    return { kind: 'resume' };
  }
  if (state === 'paused') return current === 'stopped' ? { kind: 'skip' } : { kind: 'pause' };
  if (task.state === 'pending' && neverRan === true) return { kind: 'cancel' };
  return { kind: 'stop', requeue: task.state === 'waiting' };
}

/** The task a control is about, from its stored row. */
export const controlledTask = (row: TaskRow): ControlledTask => ({ id: row.id, state: row.state, creator: row.creator, creatorRole: row.creator_role, assignee: row.assignee });

/**
 * A task a request names, checked before anything is written: authority first, so that one
 * who may not control it learns nothing of its state (a finished task's refusal names
 * the state); then that it is not over.
 */
export function checkNamedTarget(row: TaskRow, request: ControlRequest): void {
  const verdict = mayControl(request.actor, controlledTask(row));
  if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id });
  if (isTerminal(row.state)) throw endedTaskError(row.id, row.state, request.state);
}

/** Whether a request of `all` takes this live task in: what its actor may control (an agent's own), not a refusal naming another's. */
export const inAll = (row: TaskRow, request: ControlRequest): boolean => mayControl(request.actor, controlledTask(row)).ok;

/** Whether a stop of this task needs to know if it ever ran (see controlStep). */
export const asksIfRan = (request: ControlRequest, task: { state: TaskState }): boolean => request.state === 'stopped' && task.state === 'pending';

/** A named task that cannot be controlled: it is over. */
export function endedTaskError(id: number, taskState: TaskState, state: ControlState): EngineError {
  return new EngineError('INVALID_TRANSITION', `task ${id} is ${taskState}; there is no run to ${verb(state)}`, { task_id: id });
}

/** Whether a control set by `setBy` may be lifted by `role`: operators and the system lift anyone's. */
function outranks(role: string, setBy: string): boolean {
  return role === 'operator' || role === 'system' || (setBy !== 'operator' && setBy !== 'system');
}

function verb(state: ControlState): string {
  return state === 'stopped' ? 'stop' : state === 'paused' ? 'pause' : 'resume';
}
