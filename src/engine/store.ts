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

/**
 * Which of a task's events getTask reads with it: the newest `last` of those with an id below
 * `beforeId` (all of them without it), in id order. A window, so that a reader of a task with
 * a long history (a run of hundreds of steps) reads a page of it and not the whole log.
 */
export interface EventWindow {
  last: number;
  beforeId?: number;
}

export interface SweepOptions {
  /** A lease must have been seen expired at least this long before its task is reclaimed. */
  graceMs: number;
}

/**
 * What a store is and what it can do (`taskloop info`). A capability a store lacks is
 * declared here, never silently skipped: callers (and the contract suite) ask.
 */
export interface StoreInfo {
  /** `sqlite` (the embedded default) or `postgres`. */
  kind: 'sqlite' | 'postgres';
  /** Where it is: a file path, or a URL without its password. */
  location: string;
  /** The database server's or library's version. */
  version: string;
  /** The schema version of the data, and the newest this taskloop knows. */
  schemaVersion: number;
  knownSchemaVersion: number;
  readonly: boolean;
  capabilities: {
    /** Daemons on several machines may share it (leases and liveness in database time). */
    multipleHosts: boolean;
    /** Dead daemons are recognised by process id (same host only). */
    pidLiveness: boolean;
    /** Change notifications between processes without polling (fs watch, LISTEN/NOTIFY). */
    pushWakeups: boolean;
    /** Claims skip rows other claimers hold instead of waiting for them. */
    skipLocked: boolean;
  };
}

/** What a watcher waits for (TaskStore.watch). */
export type WatchTopic = 'all' | 'work';

export interface TaskStore {
  /** What this store is and can do. */
  info(): Promise<StoreInfo>;
  /**
   * The store's clock in epoch ms: the one its leases, schedules and expiries are judged by
   * (the database server's on PostgreSQL, so every machine agrees; a test's pinned clock).
   */
  clock(): Promise<number>;
  /** Creates tasks atomically; refs let tasks of one batch depend on each other. */
  createTasks(inputs: BatchTaskInput[], creator: Actor): Promise<WriteOutcome<CreateResult[]>>;
  /** Claims the best claimable task, or null when there is none for this claimer. */
  claim(input: ClaimInput): Promise<WriteOutcome<ClaimedTask | null>>;
  heartbeat(input: HeartbeatInput): Promise<{ leaseExpiresAt: number }>;
  transition(input: TransitionInput): Promise<WriteOutcome<Task>>;
  /** Two-phase stale sweep: marks expired leases, reclaims those marked for at least graceMs. */
  sweep(opts: SweepOptions): Promise<WriteOutcome<SweepResult>>;

  /**
   * `withEvents`: all of the task's events, none, or a window of them. With `reader`, a task it
   * may not read (authority.ts mayRead) comes without its events, unread: the caller refuses it.
   */
  getTask(id: number, withEvents: boolean | EventWindow, reader?: Actor): Promise<TaskWithEvents>;
  findTasks(query: FindTasksQuery): Promise<Task[]>;
  readEvents(query: ReadEventsQuery): Promise<TaskEvent[]>;
  stats(): Promise<TaskStats>;
  /**
   * Whether a claim with `input` would find a task now: a read, no write lock. An idle host
   * looks before it claims, so that a commit anywhere does not cost a write transaction that
   * finds nothing (SQLite has one writer at a time). `taskId` is not looked at.
   */
  claimable(input: ClaimInput): Promise<boolean>;
  /**
   * The cursor of the newest event, as `stats().lastEventId` without counting the tasks: no
   * event that commits later has an id at or below it (PostgreSQL: the settled horizon).
   */
  lastEventId(): Promise<number>;

  /**
   * Calls `onChange` soon after any connection (any process) commits. May call it
   * spuriously; callers read by cursor. Returns the unsubscribe function.
   *
   * `work`: the caller only claims, so only commits that can make a task claimable matter
   * (a task created or moved back to pending, a dependency completed). A store may deliver
   * those faster than the rest: on PostgreSQL they come by NOTIFY, and every other commit
   * (a claim, a step) within the follow poll (`PgWatchOptions.followMs`), because a commit
   * with NOTIFY serializes the server's commits. @defaultValue 'all'
   *
   * `queue` (with `work`): the caller claims from this queue only, so a create in another
   * queue need not wake it (a move back to pending, a freed dependent and a poll still may).
   * Without it, `work` hears at least what may make a task claimable in any queue (SQLite:
   * every commit, as `all`).
   */
  watch(onChange: () => void, topic?: WatchTopic, queue?: string): () => void;
  close(): Promise<void>;
}
