/**
 * What the task loop is given (LoopContext), what it yields and returns, and how the ending
 * of a run moves its task.
 */
import { createHash } from 'node:crypto';
import type { BreakerPolicy, Envelope, Fence, FinalPhase, OpenRunResult, Run, RunStore, SideEffect, Step, Task, TaskCard, TaskMove } from '../engine/index.js';
import type { HookRegistry } from '../plugins/hooks.js';
import type { ToolRegistry, ToolServices } from '../tools/registry.js';
import { canonical } from './detectors.js';
import { RESUME_CONDITION } from './envelope.js';
import type { Planner } from './planner.js';

export type TaskLoopEvent =
  | { type: 'run_started'; run: Run }
  | { type: 'run_resumed'; run: Run; reason: string }
  | { type: 'step_started'; step: Step }
  | { type: 'step_finished'; step: Step }
  | { type: 'run_paused'; reason: string }
  | { type: 'run_finished'; envelope: Envelope };

export interface RunResult {
  runId: number;
  taskId: number;
  /**
   * `released`: the daemon gave the task back (shutdown); `waiting_approval`: the run is
   * parked on an approval. In both the run stays open, to be resumed.
   */
  phase: FinalPhase | 'released' | 'waiting_approval';
  stopReason: string;
  envelope: Envelope | null;
}

export interface LoopContext {
  task: Task;
  fence: Fence;
  /** The run, when it was opened in the claim's own transaction (RunStore.claimRun); else the loop opens it. */
  opened?: OpenRunResult;
  runs: RunStore;
  tools: ToolRegistry;
  /** Picks the planner for a card; `decisionsMade` lets a scripted planner resume in place. */
  planner(card: TaskCard, decisionsMade: number): Planner;
  services: ToolServices;
  breakerPolicy: BreakerPolicy;
  /** Change notifications from the database (any process); the loop re-reads its control. */
  watch(onChange: () => void): () => void;
  now(): number;
  /** True once the host is shutting down: the run is released at the next step boundary. */
  draining?(): boolean;
  /** Plugins' hooks. @defaultValue none */
  hooks?: HookRegistry;
}

/** What an approval is bound to: this task, this tool, these canonical arguments. */
export function fingerprint(taskId: number, tool: string, args: unknown): string {
  return createHash('sha256').update(canonical({ task_id: taskId, tool, args })).digest('hex');
}

/** How the task moves when a run ends in `phase`. */
export function movesFor(phase: FinalPhase, acceptanceFailed: boolean): TaskMove[] {
  switch (phase) {
    case 'completed':
    case 'degraded':
      return [{ to: 'review', by: 'assignee' }, { to: 'completed', by: 'system', systemActor: 'acceptance' }];
    case 'cancelled':
      return [{ to: 'cancelled', by: 'system', systemActor: 'control', reason: 'user_stop' }];
    case 'waiting_input':
    case 'waiting_approval':
      return [{ to: 'waiting', by: 'assignee' }];
    default:
      return acceptanceFailed
        ? [{ to: 'review', by: 'assignee' }, { to: 'failed', by: 'system', systemActor: 'acceptance' }]
        : [{ to: 'failed', by: 'assignee' }];
  }
}

/**
 * Whether a run that stops here parks for input instead of ending: a restart limit or an
 * unknown side effect waits for a person and then goes on as the same run. Manual
 * acceptance is a verdict someone gives in review, not an input: that run ends.
 */
export function parksForInput(phase: FinalPhase, stopReason: string): boolean {
  return phase === 'waiting_input' && stopReason !== 'await_manual';
}

/** The envelope's `safe_resume.condition` where the way on is a command (undefined: the phase's default). */
export function resumeCondition(taskId: number, phase: FinalPhase, stopReason: string, sideEffects: ReadonlyArray<SideEffect>): string | undefined {
  const steps = (list: ReadonlyArray<SideEffect>) => list.map((s) => `step ${s.seq} (${s.tool})`).join(', ');
  if (stopReason === 'unknown_side_effect') {
    const which = steps(sideEffects.filter((s) => s.status === 'unknown' && s.repeatable !== true));
    return `decide whether ${which} took effect, then: taskloop task resume ${taskId} --side-effect happened|not-happened (not-happened carries the write out again; it is never repeated otherwise)`;
  }
  if (stopReason === 'restart_limit') return `give the run what it needs, then: taskloop task resume ${taskId} (the same run goes on with its budgets)`;
  // A run that ends with a write of unknown outcome: whoever retries must know it may have landed.
  const unsure = sideEffects.filter((s) => s.status === 'unknown');
  if (unsure.length > 0 && phase !== 'completed' && phase !== 'waiting_input' && phase !== 'waiting_approval') {
    return `check whether ${steps(unsure)} took effect: the outcome is unknown, and a new run does not know it was tried (${RESUME_CONDITION[phase]})`;
  }
  return undefined;
}

/** Resolves on the next commit anywhere (the store's watch) or after `ms`. */
export function changeOrTimeout(ctx: LoopContext, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    const unwatch = ctx.watch(done);
    function done() {
      clearTimeout(timer);
      unwatch();
      resolve();
    }
  });
}
