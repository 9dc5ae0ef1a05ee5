/** The result envelope (DESIGN §5, seed 004): one per run, however the run ends. */
import type { Envelope, FinalPhase, RejectedCall, SideEffect } from '../engine/index.js';

/** What the loop accumulates for the envelope while it runs (rebuilt from steps on resume). */
export interface Trace {
  usedTools: string[];
  rejectedCalls: RejectedCall[];
  sideEffects: SideEffect[];
  evidence: string[];
  pendingIds: string[];
}

export function emptyTrace(): Trace {
  return { usedTools: [], rejectedCalls: [], sideEffects: [], evidence: [], pendingIds: [] };
}

export const RESUME_CONDITION: Record<FinalPhase, string> = {
  completed: 'none: acceptance confirmed the goal',
  degraded: 'none: the run ended degraded; start a new run to retry what was skipped',
  failed: 'fix the cause named in stop_reason, then start a new run',
  waiting_input: 'answer the question or reconcile the side effects, then resume the task',
  waiting_approval: 'approve or reject the pending call',
  blocked: 'change the conditions that made the run loop or stall, then start a new run',
  budget_exhausted: 'raise the budget (a new authorisation), then start a new run',
  cancelled: 'none: the run was stopped',
  rejected: 'fix the card or choose another action, then start a new run',
};

export interface EnvelopeInput {
  runId: number;
  taskId: number;
  phase: FinalPhase;
  stopReason: string;
  trace: Trace;
  stepCount: number;
  checkpointVersion: number;
  acceptance?: unknown;
  message?: string;
  progress?: unknown;
  /** Plan items: their ids fill goal_progress (done → completed, the rest → pending). */
  plan?: Array<{ id: string; status: string; evidence: string[] }>;
  resumeCondition?: string;
}

export function buildEnvelope(input: EnvelopeInput): Envelope {
  const { trace } = input;
  const envelope: Envelope = {
    run_id: input.runId,
    task_id: input.taskId,
    phase: input.phase,
    stop_reason: input.stopReason,
    goal_progress:
      input.plan === undefined
        ? { completed: [...trace.evidence], pending: [] }
        : { completed: input.plan.filter((i) => i.status === 'done').map((i) => i.id), pending: input.plan.filter((i) => i.status !== 'done').map((i) => i.id) },
    side_effects: trace.sideEffects.map((s) => ({ ...s })),
    evidence: input.plan === undefined ? [...trace.evidence] : [...trace.evidence, ...input.plan.flatMap((i) => i.evidence.map((e) => `${i.id}: ${e}`))],
    acceptance: input.acceptance ?? null,
    trace: {
      used_tools: [...new Set(trace.usedTools)],
      rejected_calls: trace.rejectedCalls.map((r) => ({ ...r })),
      pending_ids: [...trace.pendingIds],
      step_count: input.stepCount,
    },
    safe_resume: { condition: input.resumeCondition ?? RESUME_CONDITION[input.phase], checkpoint_version: input.checkpointVersion },
  };
  if (input.message !== undefined) envelope.message = input.message;
  if (input.progress !== undefined) envelope.progress = input.progress;
  return envelope;
}
