/**
 * The storage port. TaskManager, the loop and every surface talk to this interface only;
 * SQLite (sqlite/task-store.ts) is the embedded adapter. A PostgreSQL adapter fills the
 * same contract: claim with `FOR UPDATE SKIP LOCKED`, `watch` with LISTEN/NOTIFY.
 *
 * Contract for every write method:
 * - one transaction; the state change and its event rows commit together or not at all;
 * - moves are decided by `checkMove` (states.ts) inside that transaction;
 * - a refusal throws an EngineError and writes nothing;
 * - transient lock contention is retried inside the adapter and never surfaces as a lost write.
 * Inputs arrive validated (TaskManager parses them at the edge).
 */
import type {
  Actor,
  BatchTaskInput,
  ClaimInput,
  ClaimedTask,
  CreateResult,
  FindTasksQuery,
  HeartbeatInput,
  SweepResult,
  Task,
  TaskEvent,
  TaskStats,
  TaskWithEvents,
  TransitionInput,
} from './types.js';

export interface WriteOutcome<T> {
  value: T;
  /** The event rows the write committed, in order, for the in-process bus. */
  events: TaskEvent[];
}

export interface ReadEventsQuery {
  afterId?: number;
  taskId?: number;
  limit?: number;
}

export interface SweepOptions {
  /** A lease must have been seen expired at least this long before its task is reclaimed. */
  graceMs: number;
}

export interface TaskStore {
  /** Creates tasks atomically; refs let tasks of one batch depend on each other. */
  createTasks(inputs: BatchTaskInput[], creator: Actor): Promise<WriteOutcome<CreateResult[]>>;
  /** Claims the best claimable task, or null when there is none for this claimer. */
  claim(input: ClaimInput): Promise<WriteOutcome<ClaimedTask | null>>;
  heartbeat(input: HeartbeatInput): Promise<{ leaseExpiresAt: number }>;
  transition(input: TransitionInput): Promise<WriteOutcome<Task>>;
  /** Two-phase stale sweep: marks expired leases, reclaims those marked for at least graceMs. */
  sweep(opts: SweepOptions): Promise<WriteOutcome<SweepResult>>;

  getTask(id: number, withEvents: boolean): Promise<TaskWithEvents>;
  findTasks(query: FindTasksQuery): Promise<Task[]>;
  readEvents(query: ReadEventsQuery): Promise<TaskEvent[]>;
  stats(): Promise<TaskStats>;

  /**
   * Calls `onChange` soon after any connection (any process) commits. May call it
   * spuriously; callers read by cursor. Returns the unsubscribe function.
   */
  watch(onChange: () => void): () => void;
  close(): Promise<void>;
}
