/**
 * The ports for everything the task loop and the daemon persist besides tasks, one per noun:
 * runs and steps, screens, stop/pause controls, tool breakers shared by every worker, the
 * daemons registry, approvals, run statistics, retention. An adapter fills them one by one
 * (sqlite/ and postgres/ each have a module per noun); `RunStore` is all of them together,
 * which is what the loop, the daemon and the surfaces take.
 * Like TaskStore, each write is one transaction with its events, and the loop's writes
 * are fenced by the claim token: a worker that lost its claim gets STALE_CLAIM.
 */
import type {
  BeginStepInput,
  Budget,
  ControlState,
  Fence,
  FinishRunInput,
  FinishStepInput,
  OpenRunResult,
  ParkRunInput,
  ResumeRunInput,
  Run,
  ScreenInfo,
  Step,
  StepWrite,
  Usage,
} from './runs.js';
import type { Approval, ApprovalState, DecideInput, ParkInput } from './approvals.js';
import type { Actor, ClaimInput, ClaimedTask, Task } from './types.js';

/** A claim made together with opening (or resuming) the claimed task's run. */
export interface ClaimedRun {
  task: ClaimedTask;
  opened: OpenRunResult;
}

export interface RunStats {
  /** Finished runs by phase since the window's start. */
  runsByPhase: Record<string, number>;
  /** Step durations (ms) by kind over the newest steps: p50, p99 and count. */
  stepDurations: Record<string, { p50: number; p99: number; count: number }>;
  staleReclaims: number;
  /** Tasks that reached completed in the window. */
  completed: number;
  windowMs: number;
}

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerVerdict {
  allowed: boolean;
  state: BreakerState;
  /** True when this call is the single half-open probe granted after the cooldown. */
  probe: boolean;
}

export interface BreakerPolicy {
  /** Consecutive failures that open the breaker. @defaultValue 3 */
  threshold: number;
  /** Time an open breaker waits before granting one probe. @defaultValue 300000 (5 min) */
  cooldownMs: number;
  /** A probe not reported within this time is presumed lost; another is granted. @defaultValue 60000 */
  probeTimeoutMs: number;
}

export interface BreakerRow {
  tool: string;
  state: BreakerState;
  failures: number;
  openedAt: number | null;
}

export interface DaemonRow {
  id: string;
  host: string;
  pid: number;
  agent: string;
  threads: number;
  startedAt: number;
  heartbeatAt: number;
}

export interface ControlRequest {
  /** Task ids, or every task with a live or parked run. */
  target: number[] | 'all';
  state: ControlState;
  actor: Actor;
  reason?: string;
}

/** Runs and their steps: the loop's fenced checkpoints. */
export interface RunPort {
  /**
   * Claims a task and starts it (as TaskManager.claimTask with `start`), and opens or
   * resumes its run, in one transaction: null when nothing is claimable, and then no write
   * transaction was taken at all. `budgetOf` (synchronous) fixes a new run's budget from the
   * claimed task's card. The daemon claims this way: one commit instead of two per run.
   *
   * `opts.look` (default true): look for a claimable task with a read before taking the write
   * lock. A caller whose last claims all found a task (a burst in a drain) passes false and
   * saves the read; when nothing is claimable after all, the write finds nothing and commits
   * nothing.
   */
  claimRun(input: ClaimInput, budgetOf: (task: ClaimedTask, now: number) => Budget, opts?: { look?: boolean }): Promise<ClaimedRun | null>;
  /** Starts the task's run, or resumes its unfinished one (budgets and usage carried over). */
  openRun(fence: Fence, budget: Budget): Promise<OpenRunResult>;
  beginStep(fence: Fence, input: BeginStepInput): Promise<Step>;
  /** Writes step writes the loop held back (see StepWrite), in order, in one transaction. */
  writeSteps(fence: Fence, writes: StepWrite[]): Promise<Step[]>;
  finishStep(fence: Fence, input: FinishStepInput): Promise<Step>;
  /** Records a pause or resume of a live run (events run.paused / run.resumed). */
  setPaused(fence: Fence, runId: number, paused: boolean, reason: string): Promise<void>;
  /** Ends the run with its envelope and moves the task, all in one transaction. */
  finishRun(fence: Fence, input: FinishRunInput): Promise<{ run: Run; task: Task }>;
  /** Counts a restart of the run (cleared working memory, same budgets); returns the new count. */
  recordRestart(fence: Fence, runId: number, reason: string): Promise<number>;
  /** Parks a run that waits for input: open, with its envelope; the task waits (see ParkRunInput). */
  parkRun(fence: Fence, input: ParkRunInput): Promise<{ run: Run; task: Task }>;
  /**
   * Resumes a run parked for input, from any process: the task returns to pending and the
   * next claimer continues the same run. A run that waits on an unknown side effect needs
   * the operator's word on it (`sideEffect`); `not_happened` makes the resumed run carry the
   * write out, `happened` counts it done. Refused, writing nothing, when the task's run is
   * not waiting for input.
   */
  resumeRun(input: ResumeRunInput): Promise<Task>;
  /** Gives the task back (shutdown): it returns to pending, the run stays open to be resumed. */
  releaseRun(fence: Fence, runId: number, reason: string): Promise<void>;

  getRun(runId: number): Promise<Run & { steps: Step[]; screen: ScreenInfo | null }>;
  runsOf(taskId: number): Promise<Run[]>;
}

/** The latest screen of a desktop run. */
export interface ScreenPort {
  /** The latest screen the run observed (a PNG), or null when it observed none. */
  getScreen(runId: number): Promise<(ScreenInfo & { png: Buffer }) | null>;
}

/** Stop, pause and resume, from any process. */
export interface ControlPort {
  /**
   * `fresh`: read the database now, past any snapshot a wrapper keeps (the daemon shares one
   * read of the controls among a thread's runs until its watcher reports a change); asked
   * before a write is called, when a watcher that has not run yet must not decide.
   */
  getControl(taskId: number, opts?: { fresh?: boolean }): Promise<ControlState>;
  /** Every task whose control is not `running`: one read for all the runs a thread holds. */
  listControls(): Promise<Map<number, ControlState>>;
  /** Stop, pause or resume from any process; returns the task ids affected. */
  setControl(request: ControlRequest): Promise<number[]>;
  /**
   * Calls `onChange` soon after a control changes anywhere; returns the unsubscribe function.
   * A store without it (SQLite: one signal for every commit) leaves callers to TaskStore.watch.
   */
  watchControls?(onChange: () => void): () => void;
}

/** Tool circuit breakers shared by every worker. */
export interface BreakerPort {
  breakerAcquire(tool: string, policy: BreakerPolicy): Promise<BreakerVerdict>;
  breakerRecord(tool: string, ok: boolean, policy: BreakerPolicy, taskId?: number): Promise<BreakerState>;
  breakers(): Promise<BreakerRow[]>;
}

/** The processes that hold runs, and the recovery of those that died. */
export interface DaemonPort {
  registerDaemon(row: Omit<DaemonRow, 'startedAt' | 'heartbeatAt'>): Promise<void>;
  /**
   * One write per daemon: its heartbeat, and the leases of the tasks its busy slots hold.
   * False when the daemon is no longer registered: its peers found it silent and took its
   * tasks back (reclaimSilentDaemons); it should register again.
   *
   * `sameStore`: refuse the beat (STORE_REPLACED, nothing written) when the database is not
   * the one this store opened (PostgreSQL: its schema made anew under the same name; SQLite's
   * guard refuses every write of a replaced file anyway). For a holder whose owner stops on
   * it (a daemon); one that cannot stop (createWorker) keeps beating, or its claims would lose
   * their leases one after another. @defaultValue false
   */
  heartbeatDaemon(id: string, busySlots: string[], opts?: { sameStore?: boolean }): Promise<boolean>;
  unregisterDaemon(id: string): Promise<void>;
  /** Reclaims the tasks of daemons on this host whose process is gone; returns the task ids. */
  reclaimDeadDaemons(host: string, selfId: string, isAlive: (pid: number) => boolean): Promise<number[]>;
  /**
   * Reclaims the tasks of daemons on any host whose last heartbeat is older than `silentMs`
   * in the store's clock, and removes them from the registry; returns the task ids. For a
   * store shared by several machines (StoreInfo.capabilities.multipleHosts), where a pid
   * tells nothing about another machine's process.
   */
  reclaimSilentDaemons(selfId: string, silentMs: number): Promise<number[]>;
  /** Lets the leases held by one worker slot run out now, so the sweep returns its task. */
  expireSlot(slotId: string): Promise<void>;
  daemons(): Promise<DaemonRow[]>;
}

/** Human approval of high-risk calls. */
export interface ApprovalPort {
  /** Parks the run on a new approval: run waiting_approval, task waiting (lease released). */
  parkForApproval(fence: Fence, input: ParkInput, usage: Usage): Promise<Approval>;
  approvalForStep(stepId: number): Promise<Approval | undefined>;
  /** Parks the run again on an approval still pending (the task was re-queued before a decision). */
  reparkForApproval(fence: Fence, approval: Approval): Promise<void>;
  /** Marks an approved approval used, so it never covers a second call. */
  useApproval(fence: Fence, approvalId: number): Promise<void>;
  /** Approve or reject from any process; the task is re-queued so its run resumes. */
  decideApproval(input: DecideInput): Promise<Approval>;
  /** Expires pending approvals past their deadline (re-queuing their tasks); returns their ids. */
  expireApprovals(): Promise<number[]>;
  listApprovals(state?: ApprovalState, limit?: number): Promise<Approval[]>;
  /** How many approvals are in `state`: a COUNT, not capped like a page of the list (GET /metrics). */
  countApprovals(state: ApprovalState): Promise<number>;
  getApproval(id: number): Promise<Approval>;
}

/** Outcomes and timings for the monitor. */
export interface RunStatsPort {
  /** Outcomes and timings since `since` (epoch ms), for the monitor. */
  runStats(since: number): Promise<RunStats>;
}

/** Deleting what finished long ago. */
export interface RetentionPort {
  /** Deletes the steps and events of up to 500 tasks that finished before `before`; returns how many. */
  compact(before: number): Promise<number>;
}

/** Every port besides tasks, as one store. */
export interface RunStore extends RunPort, ScreenPort, ControlPort, BreakerPort, DaemonPort, ApprovalPort, RunStatsPort, RetentionPort {}
