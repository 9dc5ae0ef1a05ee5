/** What every phase of one run's loop shares (loop-phases.ts). */
import type { ControlState, Fence, Run, RunStore, TaskCard } from '../engine/index.js';
import type { HookRegistry } from '../plugins/hooks.js';
import type { Journal } from './journal.js';
import type { RunCalls } from './loop-calls.js';
import type { LoopContext } from './loop-context.js';
import type { Finish } from './loop-finish.js';
import type { LoopState } from './loop-state.js';
import type { AllowedTool, Planner } from './planner.js';
import type { AnswerCounts } from './restart-policy.js';
import type { RunTrace } from './tracing.js';

export interface RunScope {
  ctx: LoopContext;
  card: TaskCard;
  run: Run;
  fence: Fence;
  state: LoopState;
  hooks: HookRegistry;
  /** The run store through the run's journal: every write of the run goes through it. */
  runs: RunStore;
  journal: Journal;
  /** The run's one signal: a stop aborts the tool or planner call in flight. */
  signal: AbortSignal;
  planner: Planner;
  calls: RunCalls;
  finish: Finish;
  /** The run's spans (tracing.ts): begin/settle/completed open and close each step's. */
  trace: RunTrace;
  allowedTools: AllowedTool[];
  /** The refusals the planner hears at its next decision. */
  rejections: Array<{ tool: string; reason: string }>;
  answers: AnswerCounts;
  /** The run's control as last read (stop and pause come from any process). */
  control(): ControlState;
  progress(): unknown;
}
