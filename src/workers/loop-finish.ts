/**
 * How a run stops: its one result envelope, the task's moves, and the plugins told. A run
 * that waits for input does not end here: it parks (loop-context.ts `parksForInput`) and
 * the same run resumes later with its steps, budgets and planner position.
 */
import type { FinalPhase, Fence, Run, RunStore, TaskMove } from '../engine/index.js';
import type { HookRegistry } from '../plugins/hooks.js';
import type { AcceptanceReport } from './acceptance.js';
import { buildEnvelope } from './envelope.js';
import { type RunResult, type TaskLoopEvent, movesFor, parksForInput, resumeCondition } from './loop-context.js';
import type { LoopState } from './loop-state.js';
import { progressVector } from './plan.js';

export interface FinishExtra {
  message?: string;
  acceptance?: AcceptanceReport;
  moves?: TaskMove[];
}

export type Finish = (phase: FinalPhase, stopReason: string, extra?: FinishExtra) => Promise<{ event: TaskLoopEvent; result: RunResult }>;

export interface FinisherScope {
  run: Run;
  fence: Fence;
  runs: RunStore;
  hooks: HookRegistry;
  state: LoopState;
  signal: AbortSignal;
}

/** The progress vector (seed 004) of the run as it stands. */
export function progressOf(state: LoopState): unknown {
  return progressVector(state.plan, {
    openQuestions: state.trace.sideEffects.filter((s) => s.status === 'unknown').length,
    evidence: state.plan.items.length > 0 ? state.plan.items.reduce((n, i) => n + i.evidence.length, 0) : state.trace.evidence.length,
    stateVersion: state.detectors.stateVersion,
    consecutiveFailures: state.usage.consecutiveFailures,
  });
}

export function createFinisher(s: FinisherScope): Finish {
  const { run, fence, runs, hooks, state, signal } = s;
  return async (phase, stopReason, extra = {}) => {
    const envelope = buildEnvelope({
      runId: run.id,
      taskId: fence.taskId,
      phase,
      stopReason,
      trace: state.trace,
      stepCount: state.usage.steps,
      checkpointVersion: state.lastSeq,
      acceptance: extra.acceptance,
      message: extra.message,
      progress: progressOf(state),
      plan: state.plan.items.length > 0 ? state.plan.items : undefined,
      resumeCondition: resumeCondition(fence.taskId, phase, stopReason, state.trace.sideEffects),
    });
    const result: RunResult = { runId: run.id, taskId: fence.taskId, phase, stopReason, envelope };
    if (parksForInput(phase, stopReason)) {
      // Not an ending: the same run resumes, with its steps, budgets and planner position.
      await runs.parkRun(fence, { runId: run.id, stopReason, envelope, usage: state.usage });
      await hooks.emit('task_transition', { taskId: fence.taskId, from: 'in_progress', to: 'waiting', actor: fence.agent, signal });
      return { event: { type: 'run_finished', envelope }, result };
    }
    const moves = extra.moves ?? movesFor(phase, extra.acceptance?.verdict === 'failed');
    await runs.finishRun(fence, { runId: run.id, phase, stopReason, envelope, usage: state.usage, moves, result: envelope });
    // The loop runs its task in progress; each move of its ending is reported to the plugins.
    let from: string = 'in_progress';
    for (const move of moves) {
      await hooks.emit('task_transition', { taskId: fence.taskId, from, to: move.to, actor: move.by === 'assignee' ? fence.agent : (move.systemActor ?? 'loop'), signal });
      from = move.to;
    }
    await hooks.emit('run_end', { taskId: fence.taskId, runId: run.id, agent: fence.agent, phase, stopReason, signal });
    return { event: { type: 'run_finished', envelope }, result };
  };
}
