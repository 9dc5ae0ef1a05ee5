/**
 * The phases of one loop iteration — observe, decide, act (gate → execute) — each a small
 * generator over one RunScope. A phase yields the loop events of its steps and returns what
 * the next phase needs, `AGAIN` (start the next iteration), or `Ended` (the run is over).
 */
import { randomUUID } from 'node:crypto';
import { type Step, type StepKind, isEngineError, parseDuration } from '../engine/index.js';
import { clip, head, printable } from '../engine/text.js';
import { splitImage } from './images.js';
import { cutAtDeadline, recordOnBreaker } from './execute.js';
import { type Decision, type Observation, PlannerError, tokenCount } from './planner.js';
import { planView, replan } from './plan.js';
import { recordAction, summaryOf } from './loop-state.js';
import { applyRestartPolicy } from './restart-policy.js';
import { createDetectors } from './detectors.js';
import type { RunResult, TaskLoopEvent } from './loop-context.js';
import type { RunScope } from './loop-scope.js';
import { STOPPED, unknownWrite } from './loop-resume.js';
import { failedSettle, isUnsure, keyFor, noteSettled } from './unsure.js';

/** Go round again (the step's outcome is handled at the top of the loop). */
export const AGAIN = Symbol('again');
export class Ended {
  constructor(readonly result: RunResult) {}
}
export type Turn<T> = T | typeof AGAIN | Ended;
type Phase<T> = AsyncGenerator<TaskLoopEvent, Turn<T>, undefined>;

/** Ends the run (or parks it) and yields its last event. */
export async function* end(r: RunScope, ...args: Parameters<RunScope['finish']>): AsyncGenerator<TaskLoopEvent, Ended, undefined> {
  const fin = await r.finish(...args);
  yield fin.event;
  return new Ended(fin.result);
}

/**
 * Text a step stores that may quote what an agent or a planner wrote: a tool's name as the
 * planner gave it, an error quoting its arguments. Written escaped and bounded, so the step
 * is written as it is on every store (PostgreSQL stores no NUL; a run whose every attempt
 * met that failed for ever) and prints on one line. A registered tool's name (a-z, 0-9, _,
 * at most 64) passes unchanged, so a resume still finds the tool a step names.
 */
function stepText(text: string, max: number): string;
function stepText(text: string | undefined, max: number): string | undefined;
function stepText(text: string | undefined, max: number): string | undefined {
  if (text === undefined) return undefined;
  // Escaped, then cut: a control character escapes to six characters, so a text cut first
  // grew up to six times past `max` (session 33's second review, N2).
  return clip(printable(head(text, max)), max, text.length);
}

/** Counts a failed step; true when that spends the run's `max_failures`. */
function failure(r: RunScope): boolean {
  r.state.usage.consecutiveFailures++;
  return r.state.usage.consecutiveFailures >= r.run.budget.maxFailures;
}

/**
 * Begins a tool call's step. A write's intent is written (with what the journal held back)
 * before it runs; a read's begin is held back with the rest (`read`: safe to make again).
 */
export async function* begin(r: RunScope, kind: StepKind, tool: string, args: unknown, key?: string, read = false): AsyncGenerator<TaskLoopEvent, Step, undefined> {
  r.trace.openStep(kind);
  const input = { runId: r.run.id, kind, tool: stepText(tool, 100), args, idempotencyKey: key };
  const started = read ? r.journal.beginLater(input, r.state.lastSeq + 1) : await r.runs.beginStep(r.fence, input);
  r.state.lastSeq = started.seq;
  yield { type: 'step_started', step: started };
  return started;
}

export type SettleOut = { result?: unknown; error?: string; durationMs: number; tokens?: number; screen?: Uint8Array };
export type SettleStatus = 'ok' | 'failed' | 'rejected' | 'unknown' | 'abandoned';

/** Settles a begun step. A write's outcome is written now; any other's is held back (journal.ts). */
export async function* settle(r: RunScope, started: Step, status: SettleStatus, out: SettleOut): AsyncGenerator<TaskLoopEvent, Step, undefined> {
  const input = {
    stepId: started.id, status, result: out.result, error: stepText(out.error, 1000), durationMs: out.durationMs, tokens: out.tokens, screen: out.screen,
    usage: { ...r.state.usage }, eventData: { progress: r.progress() },
  };
  const write = started.kind === 'action' && r.ctx.tools.get(started.tool ?? '')?.kind !== 'read';
  const finished = write ? await r.runs.finishStep(r.fence, input) : r.journal.finishLater(started, input);
  r.trace.closeStep(finished);
  r.state.summaries.push(summaryOf(finished));
  yield { type: 'step_finished', step: finished };
  return finished;
}

/** A step that completed before it was written (a decision, a refused call): held back, written with the next write. */
async function* completed(r: RunScope, kind: StepKind, status: 'ok' | 'failed' | 'rejected', fields: { tool?: string; args?: unknown; result?: unknown; error?: string; durationMs: number; tokens?: number; startedAt: number }): AsyncGenerator<TaskLoopEvent, Step, undefined> {
  const seq = ++r.state.lastSeq;
  const step = r.journal.record({ runId: r.run.id, kind, status, ...fields, tool: stepText(fields.tool, 100), error: stepText(fields.error, 1000), usage: { ...r.state.usage }, eventData: { progress: r.progress() } }, seq);
  r.trace.closeStep(step);
  yield { type: 'step_started', step: { ...step, status: 'started', finishedAt: null } };
  r.state.summaries.push(summaryOf(step));
  yield { type: 'step_finished', step };
  return step;
}

/** Observe: the card's own read, through the gate. */
export async function* observe(r: RunScope): Phase<Observation> {
  if (r.card.observe === undefined) return { tool: null, ok: true, data: null };
  const { tool, args } = r.card.observe;
  const started = yield* begin(r, 'observe', tool, args, undefined, true);
  const out = await r.calls.cardRead(tool, args);
  if (!out.ok && out.end !== undefined) {
    yield* settle(r, started, 'rejected', { error: out.error, durationMs: 0 });
    return yield* end(r, out.end.phase, out.end.stopReason, { message: out.error });
  }
  if (!out.ok) {
    const cut = cutAtDeadline(out);
    const spent = !cut && failure(r);
    yield* settle(r, started, 'failed', { error: out.error, durationMs: out.durationMs });
    if (cut) return yield* end(r, 'budget_exhausted', 'deadline');
    return spent ? yield* end(r, 'failed', 'max_failures', { message: out.error }) : AGAIN;
  }
  // max_failures counts consecutive failed observations, decisions and actions; only a
  // successful action resets it: a run that sees fine but never gets anything done is not
  // healthy, so a successful observation neither counts nor resets.
  r.state.trace.usedTools.push(tool);
  const { kept, imagePng } = splitImage(out.result);
  // The run keeps the latest screen it saw, for operators (GET /api/runs/:id/screen).
  yield* settle(r, started, 'ok', { result: kept, durationMs: out.durationMs, screen: imagePng === undefined ? undefined : Buffer.from(imagePng, 'base64') });
  return imagePng === undefined ? { tool, ok: true, data: kept } : { tool, ok: true, data: kept, imagePng };
}

/** Decide: the planner's next decision, recorded once it is made, then the restart policy. */
export async function* decide(r: RunScope, observation: Observation): Phase<{ decision: Decision; step: Step }> {
  const { state, card } = r;
  const startedAt = Date.now();
  const t0 = performance.now();
  r.trace.openStep('decide');
  let decided;
  try {
    const plan = state.plan.items.length > 0 ? state.plan.items.map(planView) : undefined;
    decided = await r.planner.decide({ goal: card.goal, steps: state.summaries, observation, allowedTools: r.allowedTools, rejections: r.rejections, signal: r.signal, trace: r.trace.parent(), ...(plan ? { plan } : {}) });
  } catch (err) {
    state.usage.steps++;
    const message = err instanceof PlannerError || isEngineError(err) ? err.message : `planner: ${String(err)}`;
    const spent = failure(r);
    yield* completed(r, 'decide', 'failed', { error: message, durationMs: performance.now() - t0, startedAt });
    return spent ? yield* end(r, 'failed', 'max_failures', { message }) : AGAIN;
  }
  // A planner's counts as the stores keep them: whole tokens, a finite cost (any planner may
  // report them; a fraction was refused on PostgreSQL at every attempt of the run).
  const tokens = tokenCount((decided.usage?.promptTokens ?? 0) + (decided.usage?.completionTokens ?? 0));
  state.usage.steps++;
  state.usage.tokens = tokenCount(state.usage.tokens + tokens);
  const cost = decided.usage?.cost ?? 0;
  if (Number.isFinite(cost) && cost > 0) state.usage.cost += cost;
  state.decisions++;
  r.rejections.length = 0;
  const { decision } = decided;
  const step = yield* completed(r, 'decide', 'ok', { result: decision, durationMs: performance.now() - t0, tokens, startedAt });

  // The restart policy: an answer a verifier blocks or finds weak is not acted on.
  const policy = await applyRestartPolicy({ hooks: r.hooks, runs: r.runs, fence: r.fence, runId: r.run.id, goal: card.goal, decision, answers: r.answers, signal: r.signal });
  if (policy.kind === 'give_up') return yield* end(r, 'waiting_input', 'restart_limit', { message: policy.message });
  if (policy.kind === 'restart') {
    // Cleared working memory: the planner starts over from the goal; budgets keep their counts.
    state.summaries = [];
    state.detectors = createDetectors(card.loop.repeat_limit, card.loop.idle_rounds);
    r.rejections.splice(0, r.rejections.length, policy.rejection);
    await r.hooks.emit('session_reset', { taskId: r.fence.taskId, runId: r.run.id, reason: policy.cause, signal: r.signal });
    return AGAIN;
  }
  if (policy.kind === 'skip') {
    r.rejections.push(policy.rejection);
    return AGAIN;
  }
  if (decision.action === 'fail') return yield* end(r, 'failed', 'planner_fail', { message: decision.reason });
  if (decision.action === 'done') {
    const fin = await r.calls.accept();
    yield fin.event;
    return new Ended(fin.result);
  }
  if (decision.action === 'replan') {
    const outcome = replan(state.plan, decision.card);
    if (!outcome.ok) {
      const reason = outcome.problems.join('; ');
      state.trace.rejectedCalls.push({ tool: 'replan', args: decision.card, reason, seq: step.seq });
      r.rejections.push({ tool: 'replan', reason });
    }
    return AGAIN;
  }
  return { decision, step };
}

/**
 * Act: gate → execute. The gate decides before the action step is written, and the step
 * records the arguments it admitted: a `started` action step is always one the gate let
 * through, so a resume may carry it out as recorded. A crash during the gate leaves the
 * decision as the run's last step, and it is taken again (loop-state.ts cutOff).
 */
export async function* act(r: RunScope, decision: Extract<Decision, { action: 'tool' }>): Phase<undefined> {
  const { state, fence, card, ctx } = r;
  const verdict = await r.calls.gate(decision.tool, decision.args);
  if (verdict.kind === 'refuse') {
    const refused = yield* completed(r, 'action', 'rejected', { tool: decision.tool, args: decision.args, error: verdict.reason, durationMs: 0, startedAt: Date.now() });
    r.rejections.push({ tool: decision.tool, reason: verdict.reason });
    const detector = recordAction(state, refused, false);
    if (verdict.end !== undefined) return yield* end(r, verdict.end.phase, verdict.end.stopReason, { message: verdict.reason });
    if (detector !== null) return yield* end(r, 'blocked', 'loop_detected', { message: `no-progress detector ${detector} fired` });
    return AGAIN;
  }
  // An idempotent write tried before with no answer goes again under the same key (unsure.ts).
  const key = keyFor(state.unsure, fence.taskId, verdict.tool.name, verdict.args) ?? randomUUID();
  const write = verdict.tool.kind === 'write';
  const actionStep = yield* begin(r, 'action', decision.tool, verdict.args, key, verdict.kind === 'run' && verdict.tool.kind === 'read');
  if (verdict.kind === 'park') {
    state.usage.pending++;
    // A write may not start after the run's deadline (gate.ts), so its approval lapses then at the latest.
    const asked = card.approval?.expires_in === undefined ? null : ctx.now() + parseDuration(card.approval.expires_in);
    const deadline = write ? r.run.budget.deadlineAt : null;
    const approval = await r.runs.parkForApproval(fence, {
      runId: r.run.id,
      stepId: actionStep.id,
      tool: verdict.tool.name,
      args: verdict.args,
      fingerprint: verdict.fingerprint,
      expiresAt: deadline === null ? asked : asked === null ? deadline : Math.min(asked, deadline),
    }, state.usage);
    r.trace.closeStep({ ...actionStep, status: 'waiting_approval' });
    yield { type: 'run_paused', reason: `waiting for approval ${approval.id}` };
    return new Ended({ runId: r.run.id, taskId: fence.taskId, phase: 'waiting_approval', stopReason: 'approval_required', envelope: null });
  }
  const out = await r.calls.exec(verdict.tool.name, verdict.args, key);
  if (!out.ok && out.notCalled === true) {
    // Stopped after the step began and before the call: nothing happened, and it says so.
    yield* settle(r, actionStep, 'rejected', { error: out.error, durationMs: 0 });
    return AGAIN; // the stop is handled at the top of the loop
  }
  if (r.hooks.has('tool_after', verdict.tool.kind)) await r.hooks.emit('tool_after', {
    tool: verdict.tool.name, kind: verdict.tool.kind, risk: verdict.tool.risk, args: verdict.args, taskId: fence.taskId, runId: r.run.id,
    agent: fence.agent, card: ctx.task.card, signal: r.signal, services: ctx.services,
    ok: out.ok, ...(out.ok ? { result: out.result } : { error: out.error }),
  });
  if (write) state.usage.writeCalls++;
  // It may have taken effect: never tried again unasked; a person says which.
  const lost = yield* unknownWrite({ state, runs: r.runs, fence, breakerPolicy: ctx.breakerPolicy, finish: r.finish, settle: (st, status, o) => settle(r, st, status, o) }, actionStep, verdict.tool, out);
  if (lost === STOPPED) return AGAIN; // the stop is handled at the top of the loop
  if (lost !== undefined) return new Ended(lost);
  // Cut off by a stop (handled at the top of the loop), or (a read) at the run's deadline,
  // which ends the run here: the cut's timer may fire a millisecond before the clock the top
  // of the loop reads has reached the deadline.
  if (!out.ok && (out.aborted || cutAtDeadline(out))) {
    const cut = yield* settle(r, actionStep, 'failed', { ...failedSettle(verdict.tool, out), durationMs: out.durationMs });
    noteSettled(state.unsure, fence.taskId, cut);
    if (isUnsure(cut)) recordAction(state, cut, true);
    if (out.aborted) return AGAIN;
    return yield* end(r, 'budget_exhausted', 'deadline');
  }
  await recordOnBreaker(r.runs, verdict.tool.name, out, ctx.breakerPolicy, fence.taskId);
  let spent = false;
  if (out.ok) state.usage.consecutiveFailures = 0;
  else spent = failure(r);
  const done = yield* settle(r, actionStep, out.ok ? 'ok' : 'failed', out.ok ? { result: splitImage(out.result).kept, durationMs: out.durationMs } : { ...failedSettle(verdict.tool, out), durationMs: out.durationMs });
  noteSettled(state.unsure, fence.taskId, done);
  const detector = recordAction(state, done, write);
  const failedItem = state.plan.items.find((i) => i.status === 'failed');
  if (failedItem !== undefined) {
    return yield* end(r, 'failed', 'plan_item_failed', { message: `plan item ${failedItem.id} failed ${failedItem.failures} times (${failedItem.transient} retries allowed): ${out.ok ? '' : out.error}` });
  }
  if (spent) return yield* end(r, 'failed', 'max_failures', { message: out.ok ? undefined : out.error });
  if (detector !== null) return yield* end(r, 'blocked', 'loop_detected', { message: `no-progress detector ${detector} fired` });
  return undefined;
}
