/**
 * The loop's working memory, and how it is rebuilt from the persisted steps when a run is
 * resumed after a crash, a pause or a release, so a resumed run continues where it was.
 */
import type { Run, Step, TaskCard, Usage } from '../engine/index.js';
import type { ToolRegistry } from '../tools/registry.js';
import { type DetectorState, canonical, createDetectors, observeRound } from './detectors.js';
import { type Trace, emptyTrace } from './envelope.js';
import type { StepSummary } from './planner.js';
import { type PlanState, planFromCard, recordPlanCall, replan } from './plan.js';
import { type UnsureKeys, isUnsure, noteSettled } from './unsure.js';

export interface LoopState {
  usage: Usage;
  trace: Trace;
  detectors: DetectorState;
  summaries: StepSummary[];
  /** Decisions made so far (the scripted planner's position). */
  decisions: number;
  lastSeq: number;
  /** A high-risk call was skipped because its approval expired and the card says degrade. */
  degraded: boolean;
  plan: PlanState;
  /** Idempotent writes whose outcome is unknown: the same call again reuses its key (unsure.ts). */
  unsure: UnsureKeys;
  /**
   * The run's last step is a decision whose consequence a crash cut off (see rebuildState):
   * `retake` a tool decision (not counted: the planner takes it again), or carry out a
   * `done` (acceptance) or a `fail`.
   */
  cutOff?: { step: Step; action: 'retake' | 'done' | 'fail' };
}

/** How a step skipped by an expired approval (on_expiry: degraded) is marked. */
export const DEGRADED = 'approval expired; the call is skipped (degraded)';

const SUMMARY_CHARS = 300;

export function summarize(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > SUMMARY_CHARS ? `${text.slice(0, SUMMARY_CHARS)}…` : text;
}

export function summaryOf(step: Step): StepSummary {
  return {
    seq: step.seq,
    kind: step.kind,
    status: step.status,
    tool: step.tool,
    args: step.args,
    result: summarize(step.result),
    error: step.error,
  };
}

/** `crashed`: the run's last holder died mid-run (it was `running` when claimed again). */
export function rebuildState(run: Run, steps: Step[], card: TaskCard, tools: ToolRegistry, crashed = false): LoopState {
  const state: LoopState = {
    usage: { ...run.usage },
    trace: emptyTrace(),
    detectors: createDetectors(card.loop.repeat_limit, card.loop.idle_rounds),
    summaries: [],
    decisions: 0,
    lastSeq: 0,
    degraded: false,
    plan: planFromCard(card),
    unsure: new Map(),
  };
  for (const step of steps) {
    state.lastSeq = step.seq;
    if (step.status === 'started' || step.status === 'waiting_approval' || step.status === 'not_happened') continue; // settled by the loop on resume
    if (step.status === 'rejected' && step.error?.startsWith(DEGRADED) === true) state.degraded = true;
    state.summaries.push(summaryOf(step));
    if (step.kind === 'decide' && step.status === 'ok') {
      state.decisions++;
      const decision = step.result as { action?: string; card?: Record<string, unknown> } | null;
      if (decision?.action === 'replan' && decision.card !== undefined) replan(state.plan, decision.card);
    }
    if (step.kind === 'observe' && step.status === 'ok' && step.tool !== null) state.trace.usedTools.push(step.tool);
    if (step.kind !== 'action' || step.tool === null) continue;
    noteSettled(state.unsure, run.taskId, step);
    recordAction(state, step, tools.get(step.tool)?.kind === 'write');
  }
  // A decision is committed before what it leads to (verifiers, the action step, acceptance),
  // so a run that crashed with an ok decision as its last step was cut off right after it.
  // (A run parked or released after a decision — a verifier refused it — was not.) A tool decision is
  // taken again — its action never began, so nothing is repeated, and it is never dropped; a
  // done goes straight to acceptance and a fail ends the run, without asking the planner again.
  const last = steps.at(-1);
  if (crashed && last !== undefined && last.kind === 'decide' && last.status === 'ok') {
    const action = (last.result as { action?: string } | null)?.action;
    if (action === 'tool') {
      state.decisions--;
      state.summaries.pop();
      state.cutOff = { step: last, action: 'retake' };
    } else if (action === 'done' || action === 'fail') {
      state.cutOff = { step: last, action };
    }
  }
  return state;
}

/** Folds one finished action step into the trace and the detectors; returns a detector that fired. */
export function recordAction(state: LoopState, step: Step, write: boolean) {
  const tool = step.tool!;
  if (step.status === 'rejected') {
    state.trace.rejectedCalls.push({ tool, args: step.args, reason: step.error ?? '', seq: step.seq });
    return observeRound(state.detectors, null);
  }
  if (step.status === 'unknown') {
    state.trace.sideEffects.push({ tool, args: step.args, seq: step.seq, status: 'unknown' });
    return null;
  }
  if (step.status === 'abandoned') return null;
  // Failed as far as the plan and the detectors go, but it may have taken effect.
  if (isUnsure(step)) state.trace.sideEffects.push({ tool, args: step.args, seq: step.seq, status: 'unknown', repeatable: true });
  const ok = step.status === 'ok';
  recordPlanCall(state.plan, tool, ok, step.seq);
  if (ok) {
    state.trace.usedTools.push(tool);
    if (write) {
      // The same call done at last (under its kept key): its earlier attempts of unknown outcome are settled by it.
      const effects = state.trace.sideEffects;
      if (effects.some((e) => e.repeatable === true && e.tool === tool)) {
        const call = canonical(step.args);
        for (let i = effects.length - 1; i >= 0; i--) if (effects[i]!.repeatable === true && effects[i]!.tool === tool && canonical(effects[i]!.args) === call) effects.splice(i, 1);
      }
      effects.push({ tool, args: step.args, seq: step.seq, status: 'done' });
    }
    state.trace.evidence.push(`step ${step.seq}: ${tool}`);
  }
  return observeRound(state.detectors, { tool, args: step.args, ok, write, result: step.result });
}
