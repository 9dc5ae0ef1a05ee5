/**
 * Runs and steps: the persisted record of the task loop. A run is one logical attempt at
 * a task; it survives pauses, approval waits and crash reclaims (the next claimer resumes
 * it after its last finished step) and ends with exactly one result envelope. Every write
 * here is fenced by the task's current claim token.
 */
import type { SystemActorName } from './actors.js';
import type { Actor, TaskState } from './types.js';

export const RUN_PHASES = [
  'running',
  'paused',
  'completed',
  'failed',
  'waiting_input',
  'waiting_approval',
  'blocked',
  'budget_exhausted',
  'cancelled',
  'rejected',
  'degraded',
] as const;
export type RunPhase = (typeof RUN_PHASES)[number];
export type FinalPhase = Exclude<RunPhase, 'running' | 'paused'>;

export const STEP_KINDS = ['observe', 'decide', 'action'] as const;
export type StepKind = (typeof STEP_KINDS)[number];
/**
 * `unknown`: a write that started but whose outcome was lost in a crash. `not_happened`: an
 * unknown write an operator declared did not take effect; the resumed run carries it out.
 */
export const STEP_STATUSES = ['started', 'ok', 'failed', 'rejected', 'unknown', 'not_happened', 'abandoned', 'waiting_approval'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/** An operator's word on an unknown side effect, given when the run is resumed. */
export type SideEffectDeclaration = 'happened' | 'not_happened';

/**
 * Parking a run that waits for input (`waiting_input`): the run stays open — its steps,
 * budgets, planner position and trace are kept — and its task waits; `resumeRun` hands it
 * back to the queue and the next claimer continues the same run.
 */
export interface ParkRunInput {
  runId: number;
  stopReason: string;
  envelope: Envelope;
  usage: Usage;
}

export interface ResumeRunInput {
  taskId: number;
  actor: Actor;
  /** Required when the run waits on an unknown side effect. */
  sideEffect?: SideEffectDeclaration;
  reason?: string;
}

/** Limits stored on the run when it starts; never reset by a resume. Null means unbounded. */
export interface Budget {
  maxSteps: number;
  maxFailures: number;
  maxWriteCalls: number | null;
  maxPending: number | null;
  /** Absolute wall-clock deadline (epoch ms). */
  deadlineAt: number | null;
  maxTokens: number | null;
  maxCost: number | null;
}

/** What the run has spent so far; carried across pause, crash and resume. */
export interface Usage {
  steps: number;
  writeCalls: number;
  pending: number;
  tokens: number;
  cost: number;
  consecutiveFailures: number;
}

export interface Run {
  id: number;
  taskId: number;
  phase: RunPhase;
  stopReason: string | null;
  budget: Budget;
  usage: Usage;
  /** Seq of the last finished step: where a resume continues. */
  checkpointVersion: number;
  restarts: number;
  startedAt: number;
  finishedAt: number | null;
  envelope: Envelope | null;
}

export interface Step {
  id: number;
  runId: number;
  seq: number;
  kind: StepKind;
  status: StepStatus;
  tool: string | null;
  args: unknown;
  result: unknown;
  error: string | null;
  durationMs: number | null;
  tokens: number;
  idempotencyKey: string | null;
  startedAt: number;
  finishedAt: number | null;
}

export interface RejectedCall {
  tool: string;
  args: unknown;
  reason: string;
  seq: number;
}

export interface SideEffect {
  tool: string;
  args: unknown;
  seq: number;
  status: 'done' | 'unknown';
  /** An idempotent write of unknown outcome: the same call goes again only under its idempotency key. */
  repeatable?: true;
}

/** The result envelope (DESIGN §5, seed 004), snake_case as users read it. */
export interface Envelope {
  run_id: number;
  task_id: number;
  phase: FinalPhase;
  stop_reason: string;
  goal_progress: { completed: string[]; pending: string[] };
  side_effects: SideEffect[];
  evidence: string[];
  acceptance: unknown;
  /** `rejected_omitted`: refused calls past the first ENVELOPE_REJECTED listed (their steps keep them). */
  trace: { used_tools: string[]; rejected_calls: RejectedCall[]; rejected_omitted?: number; pending_ids: string[]; step_count: number };
  safe_resume: { condition: string; checkpoint_version: number };
  message?: string;
  progress?: unknown;
}

export interface Fence {
  taskId: number;
  claimToken: string;
  agent: string;
}

export interface OpenRunResult {
  run: Run;
  /** Every step of the run so far, in order. */
  steps: Step[];
  resumed: boolean;
  /**
   * The phase a resumed run had before this claim: `running` means its last holder died
   * mid-run (a crash or a lost lease); `paused` a release; `waiting_*` a park.
   */
  resumedFrom?: RunPhase;
}

export interface BeginStepInput {
  runId: number;
  kind: StepKind;
  tool?: string;
  args?: unknown;
  idempotencyKey?: string;
  /** When the call began, if before this write (a read's begin held back by the journal). @defaultValue the write's time */
  startedAt?: number;
  /** Step writes the loop held back, written first in the same transaction (see StepWrite). */
  before?: StepWrite[];
}

/** A step written once it completed (a decision, a refused call): one row, one event. */
export interface RecordStepInput {
  runId: number;
  kind: StepKind;
  status: Exclude<StepStatus, 'started'>;
  tool?: string;
  args?: unknown;
  result?: unknown;
  error?: string;
  durationMs: number;
  tokens?: number;
  startedAt: number;
  /** The call's key (a read recorded whole once it completed). */
  idempotencyKey?: string;
  /** The screen the step saw (an observation); the run keeps only its latest. */
  screen?: Uint8Array;
  /** The run's usage after this step. */
  usage: Usage;
  eventData?: Record<string, unknown>;
}

/**
 * A step write the loop may hold back and fold into its next write (workers/journal.ts):
 * recording a completed step, beginning a read that is still running, or finishing a read
 * begun earlier. Each is safe to lose in a crash — a decision is taken again, a read is
 * made again — so none needs a transaction of its own. A write's intent and its outcome
 * are never held back.
 */
export type StepWrite = { record: RecordStepInput } | { begin: BeginStepInput } | { finish: FinishStepInput };

/** The usage a batch of held-back writes leaves the run with: that of its last write that carries one. */
export function usageAfter(writes: readonly StepWrite[]): Usage | undefined {
  for (let i = writes.length - 1; i >= 0; i--) {
    const w = writes[i]!;
    if ('finish' in w) return w.finish.usage;
    if ('record' in w) return w.record.usage;
  }
  return undefined;
}

export interface FinishStepInput {
  stepId: number;
  status: Exclude<StepStatus, 'started'>;
  result?: unknown;
  error?: string;
  durationMs: number;
  tokens?: number;
  /** The run's usage after this step. */
  usage: Usage;
  /** Extra fields for the run.step_finished event (e.g. the progress vector). */
  eventData?: Record<string, unknown>;
  /** The PNG screen this step observed; the run keeps its latest (`RunStore.getScreen`). */
  screen?: Uint8Array;
  /** Step writes held back, written first in the same transaction. */
  before?: StepWrite[];
}

/** Where a run's latest screen came from (its PNG is read with `RunStore.getScreen`). */
export interface ScreenInfo {
  seq: number;
  takenAt: number;
  bytes: number;
}

/** How the task moves when a run ends; each move gets its own event. */
export interface TaskMove {
  to: TaskState;
  /** `assignee` moves as the claiming agent (fenced); `system` as the named component. */
  by: 'assignee' | 'system';
  systemActor?: SystemActorName;
  reason?: string;
}

export interface FinishRunInput {
  runId: number;
  phase: FinalPhase;
  stopReason: string;
  envelope: Envelope;
  usage: Usage;
  moves: TaskMove[];
  result?: unknown;
  /** Step writes held back (the final decision), written first in the same transaction. */
  before?: StepWrite[];
}

/** The result an idempotent write of unknown outcome records (a failed step has no other result; workers/unsure.ts). */
export const UNSURE_RESULT = Object.freeze({ outcome: 'unknown' } as const);

export const CONTROL_STATES = ['running', 'paused', 'stopped'] as const;
export type ControlState = (typeof CONTROL_STATES)[number];
