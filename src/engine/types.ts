/**
 * Terminology — use exactly these words in names, events and messages.
 *
 * task      A unit of work with a title, a card and a state (see states.ts). Stored in `tasks`.
 * card      The JSON description of what a task asks for (goal, tools, acceptance, budget …).
 * run       One attempt at one task by the task loop; persisted with its steps.
 * step      One checkpointed stage of a run: observe, decide or action.
 * tool      A named, schema-checked operation a planner may ask for (read or write).
 * hook      A named point in the loop (`tool_before`, `run_end`, …) where plugins run.
 * plugin    A module that registers hooks.
 * claim     Taking a pending task: it becomes `claimed`, gets an assignee, a lease and a
 *           fresh claim token.
 * lease     The time until which a claim is valid without a heartbeat.
 * claim token  The fencing token of one claim: every later write for that claim presents it.
 * actor     Who makes a change: an agent (by name), an operator, or the system
 *           (stale sweep, acceptance runner, restart policy, approvals).
 * event     An append-only row in `task_events`, written in the same transaction as the
 *           change it records.
 */

export const TASK_STATES = [
  'pending',
  'claimed',
  'in_progress',
  'waiting',
  'review',
  'completed',
  'failed',
  'cancelled',
] as const;
export type TaskState = (typeof TASK_STATES)[number];

export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'cancelled']);

export const ACTOR_ROLES = ['agent', 'operator', 'reviewer', 'system'] as const;
export type ActorRole = (typeof ACTOR_ROLES)[number];

/** Who makes a change, as (id, role): every rule compares both (see actors.ts). */
export interface Actor {
  /** An agent's name, an operator's name, or a system component (`sweeper`, `acceptance`). */
  id: string;
  role: ActorRole;
}

export type Card = Record<string, unknown>;

export interface Task {
  id: number;
  title: string;
  state: TaskState;
  priority: number;
  creator: string;
  /** Whether the creator was an operator, an agent or the system (command checks need an operator). */
  creatorRole: ActorRole;
  assignee: string | null;
  attempts: number;
  maxAttempts: number;
  dependsOn: number[];
  queue: string;
  forAgent: string | null;
  requires: string[];
  idempotencyKey: string | null;
  runAfter: number;
  createdAt: number;
  updatedAt: number;
  leaseExpiresAt: number | null;
  card: Card;
  result: unknown;
}

export interface ClaimedTask extends Task {
  claimToken: string;
}

export interface TaskEvent {
  /** The cursor: strictly increasing across the whole file. */
  id: number;
  taskId: number | null;
  type: string;
  actor: string;
  /** The actor's role: an agent named `operator` is still an agent in the log. */
  actorRole: ActorRole;
  data: Record<string, unknown>;
  createdAt: number;
}

export interface TaskWithEvents extends Task {
  events: TaskEvent[];
}

export interface CreateTaskInput {
  title: string;
  card?: Card;
  priority?: number;
  dependsOn?: number[];
  idempotencyKey?: string;
  /** Epoch ms; the task is not claimable before. */
  runAfter?: number;
  queue?: string;
  forAgent?: string;
  requires?: string[];
  maxAttempts?: number;
}

/** A task of a batch: `ref` names it inside the batch, `dependsOnRefs` point at other refs. */
export interface BatchTaskInput extends CreateTaskInput {
  ref?: string;
  dependsOnRefs?: string[];
}

export interface CreateResult {
  task: Task;
  /** false when an idempotency key matched an existing task. */
  created: boolean;
}

export interface ClaimInput {
  agent: string;
  capabilities?: string[];
  queue?: string;
  /** Lease length in ms. */
  leaseMs?: number;
  /** Claim this task only (fails with null if it is not claimable by this agent). */
  taskId?: number;
  /** Also move the task to in_progress in the same transaction (two events). */
  start?: boolean;
  /** The daemon worker holding the claim; lets its heartbeat keep the lease. */
  workerId?: string;
  /**
   * Only tasks that carry a card (a daemon runs cards): a task created without one waits for
   * an agent to claim it by hand or through its tools. @defaultValue false
   */
  withCard?: boolean;
}

export interface TransitionInput {
  taskId: number;
  to: TaskState;
  actor: Actor;
  claimToken?: string;
  reason?: string;
  /** Stored as the task's result (JSON). */
  result?: unknown;
  /** Further moves applied in the same transaction, each with its own event. */
  then?: Array<{ to: TaskState; actor: Actor; reason?: string; result?: unknown }>;
}

export interface HeartbeatInput {
  taskId: number;
  agent: string;
  claimToken: string;
  leaseMs?: number;
}

export interface FindTasksQuery {
  states?: TaskState[];
  assignee?: string;
  creator?: string;
  queue?: string;
  limit?: number;
  /** Return tasks with id greater than this (keyset paging). */
  afterId?: number;
  /** Only tasks this actor may read (authority.ts `mayRead`); everything when unset. */
  visibleTo?: Actor;
  /**
   * Leave each task's card and result unread (they come back as `{}` and null): a listing
   * that does not show them need not read, parse and copy up to 256 KiB a task.
   */
  summary?: boolean;
}

export interface SweepResult {
  /** Tasks whose lease ran out and that were marked as suspects in this pass. */
  marked: number;
  requeued: number[];
  failed: number[];
  /**
   * Stale tasks this pass could not reclaim, each with why (its error's code and message); the
   * others were reclaimed all the same (sweeps.ts). Absent when there were none.
   */
  skipped?: Array<{ taskId: number; code: string; message: string }>;
}

export interface TaskStats {
  byState: Record<TaskState, number>;
  /** The cursor of the newest event (0 when the log is empty). */
  lastEventId: number;
}
