/** The result envelope (DESIGN §5, seed 004): one per run, however the run ends. */
import type { Envelope, FinalPhase, RejectedCall, SideEffect } from '../engine/index.js';
import { clip } from '../engine/text.js';

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

/**
 * The most bytes (as JSON) of calls' arguments an envelope repeats in full: the side effects'
 * first, then the rejected calls'. Past it a call's `args` is `{ omitted_bytes: n }`; its step
 * (by `seq`) keeps them whole. A run lists a rejected call for each refused step, up to its
 * `max_steps` (10,000), and a refused replan's arguments are a whole card: the envelope is
 * written twice (the run's, the task's result) and read by every reader of the task, and one
 * too big to serialise failed its run's ending (session 33's review, F1).
 */
export const ENVELOPE_ARGS_BYTES = 64 * 1024;

/** Each call with its args, or `{ omitted_bytes }` once `budget` bytes of args have been repeated. */
function boundArgs<T extends { args: unknown }>(calls: readonly T[], budget: { left: number }): T[] {
  return calls.map((call) => {
    let bytes: number;
    try {
      bytes = Buffer.byteLength(JSON.stringify(call.args ?? null), 'utf8');
    } catch {
      bytes = Infinity;
    }
    if (bytes <= budget.left) {
      budget.left -= bytes;
      return { ...call };
    }
    budget.left = 0;
    return { ...call, args: { omitted_bytes: Number.isFinite(bytes) ? bytes : null } };
  });
}

/**
 * The most refused calls an envelope lists (the first ones; `rejected_omitted` counts the
 * rest, which their steps keep), and the most characters of each one's reason. A reason quotes
 * what the card says (a refused replan named every done item of the plan): 1,500 refused
 * replans made a 192 MB envelope, and 8,000 refused calls whose reasons quoted control
 * characters 53 MB (session 33's second review).
 */
export const ENVELOPE_REJECTED = 100;
export const ENVELOPE_REASON_CHARS = 1000;

export function buildEnvelope(input: EnvelopeInput): Envelope {
  const { trace } = input;
  const budget = { left: ENVELOPE_ARGS_BYTES };
  const sideEffects = boundArgs(trace.sideEffects, budget);
  const listed = trace.rejectedCalls.slice(0, ENVELOPE_REJECTED).map((r) => ({ ...r, reason: clip(r.reason, ENVELOPE_REASON_CHARS) }));
  const rejectedCalls = boundArgs(listed, budget);
  const omitted = trace.rejectedCalls.length - listed.length;
  const envelope: Envelope = {
    run_id: input.runId,
    task_id: input.taskId,
    phase: input.phase,
    stop_reason: input.stopReason,
    goal_progress:
      input.plan === undefined
        ? { completed: [...trace.evidence], pending: [] }
        : { completed: input.plan.filter((i) => i.status === 'done').map((i) => i.id), pending: input.plan.filter((i) => i.status !== 'done').map((i) => i.id) },
    side_effects: sideEffects,
    evidence: input.plan === undefined ? [...trace.evidence] : [...trace.evidence, ...input.plan.flatMap((i) => i.evidence.map((e) => `${i.id}: ${e}`))],
    acceptance: input.acceptance ?? null,
    trace: {
      used_tools: [...new Set(trace.usedTools)],
      rejected_calls: rejectedCalls,
      ...(omitted > 0 ? { rejected_omitted: omitted } : {}),
      pending_ids: [...trace.pendingIds],
      step_count: input.stepCount,
    },
    safe_resume: { condition: input.resumeCondition ?? RESUME_CONDITION[input.phase], checkpoint_version: input.checkpointVersion },
  };
  if (input.message !== undefined) envelope.message = input.message;
  if (input.progress !== undefined) envelope.progress = input.progress;
  return envelope;
}
