/**
 * Resuming a run after a crash, a release or an approval wait: settling the steps the
 * previous attempt left open before the loop goes on. An interrupted observation or
 * decision is made again; an interrupted read, or idempotent write, is carried out again
 * under its idempotency key; any other interrupted write is never repeated (its outcome is
 * unknown: the run waits for input). A call parked on an approval does what the decision says.
 */
import { randomUUID } from 'node:crypto';
import type { Approval, BreakerPolicy, Fence, FinalPhase, RunStore, Step, TaskCard } from '../engine/index.js';
import type { Tool, ToolRegistry } from '../tools/registry.js';
import type { AcceptanceReport } from './acceptance.js';
import { type ExecOutcome, cutAtDeadline, recordOnBreaker } from './execute.js';
import type { GateVerdict } from './gate.js';
import { DEGRADED, type LoopState, recordAction } from './loop-state.js';
import type { RunResult, TaskLoopEvent } from './loop.js';
import { UNSURE_RESULT, failedSettle, isUnsure, noteSettled, unknownError, unsureWrite } from './unsure.js';

type Settle = (
  started: Step,
  status: 'ok' | 'failed' | 'rejected' | 'unknown' | 'abandoned',
  out: { result?: unknown; error?: string; durationMs: number; tokens?: number },
) => AsyncGenerator<TaskLoopEvent, Step, undefined>;

/** What the resume needs of the loop that runs it. */
export interface ResumeScope {
  state: LoopState;
  tools: ToolRegistry;
  runs: RunStore;
  fence: Fence;
  card: TaskCard;
  runId: number;
  breakerPolicy: BreakerPolicy;
  /** The refusals the planner hears at its next decision (appended to). */
  rejections: Array<{ tool: string; reason: string }>;
  exec(tool: string, args: Record<string, unknown>, key: string): Promise<ExecOutcome>;
  /** The one gate (gate.ts), which an approved call passes again before it runs. */
  gate(tool: string, rawArgs: unknown, approval?: Approval, of?: 'continued'): Promise<GateVerdict>;
  settle: Settle;
  /** Runs acceptance and ends the run by its verdict (the planner said done). */
  accept(): Promise<{ event: TaskLoopEvent; result: RunResult }>;
  finish(phase: FinalPhase, stopReason: string, extra?: { message?: string; acceptance?: AcceptanceReport }): Promise<{ event: TaskLoopEvent; result: RunResult }>;
  stopped(): boolean;
}

/**
 * A decision a crash cut off from its consequence (loop-state.ts `cutOff`): a tool decision is
 * marked abandoned and taken again by the planner; a done resumes into acceptance; a fail ends
 * the run as the planner said.
 */
export async function* resumeDecided(s: ResumeScope): AsyncGenerator<TaskLoopEvent, RunResult | undefined, undefined> {
  const cut = s.state.cutOff;
  if (cut === undefined) return undefined;
  s.state.cutOff = undefined;
  if (cut.action === 'retake') {
    yield* s.settle(cut.step, 'abandoned', { error: 'interrupted before its action began; decided again', durationMs: 0 });
    return undefined;
  }
  const fin = cut.action === 'done' ? await s.accept() : await s.finish('failed', 'planner_fail', { message: (cut.step.result as { reason?: string } | null)?.reason });
  yield fin.event;
  return fin.result;
}

/**
 * Settles steps a crash interrupted, and writes whose outcome an operator has declared;
 * returns a result when the run must end or park here.
 *
 * Where each crash point lands: a write interrupted before it finished is `unknown` (never
 * repeated unless idempotent); an operator's `not-happened` makes it `not_happened`, and it
 * is carried out here, through the whole gate, exactly once; `happened` made it `ok`. A run
 * resumed while an unknown write is still undeclared parks for input again at once.
 */
export async function* resumeInterrupted(s: ResumeScope, steps: Step[]): AsyncGenerator<TaskLoopEvent, RunResult | undefined, undefined> {
  for (const declared of steps.filter((step) => step.status === 'not_happened')) {
    const parked = yield* redo(s, declared, true);
    if (parked !== undefined) return parked;
  }
  const undeclared = steps.find((step) => step.status === 'unknown');
  if (undeclared !== undefined) {
    const fin = await s.finish('waiting_input', 'unknown_side_effect', { message: `step ${undeclared.seq} (${undeclared.tool}) may or may not have taken effect; an operator must say which` });
    yield fin.event;
    return fin.result;
  }
  for (const unfinished of steps.filter((step) => step.status === 'started')) {
    const tool = unfinished.tool === null ? undefined : s.tools.get(unfinished.tool);
    if (unfinished.kind !== 'action' || tool === undefined) {
      // An interrupted observation or decision is simply made again.
      yield* s.settle(unfinished, 'abandoned', { error: 'interrupted; made again', durationMs: 0 });
    } else if (tool.kind === 'read' || tool.idempotent) {
      // The decision stands: a read, or a write that is safe to repeat under the same
      // idempotency key, is carried out again — through the whole gate again, since a step
      // may have been written for a call the gate was still deciding (or had refused) when
      // the crash came: nothing outside the card's allowlist or scope runs, and a call that
      // needs a person waits for one.
      const parked = yield* redo(s, unfinished, false);
      if (parked !== undefined) return parked;
    } else {
      s.state.usage.writeCalls++;
      const lost = yield* s.settle(unfinished, 'unknown', { error: 'the write started but its outcome was lost in a crash; reconcile it before resuming', durationMs: 0 });
      recordAction(s.state, lost, true);
      const fin = await s.finish('waiting_input', 'unknown_side_effect', { message: `step ${lost.seq} (${tool.name}) may or may not have taken effect` });
      yield fin.event;
      return fin.result;
    }
  }
  return undefined;
}

/**
 * A run stopped while no one ran it: what its last attempt left open is settled as it stands,
 * nothing is carried out again (not even a write an operator declared did not happen), so the
 * cancelled run's envelope tells what may have happened. A write cut off is `unknown` (an
 * idempotent one failed, its outcome unknown: unsure.ts); a call parked on an approval is
 * refused; anything else is abandoned.
 */
export async function* settleStopped(s: ResumeScope, steps: Step[]): AsyncGenerator<TaskLoopEvent, void, undefined> {
  const cut = s.state.cutOff;
  s.state.cutOff = undefined;
  if (cut?.action === 'retake') yield* s.settle(cut.step, 'abandoned', { error: 'interrupted before its action began; the run was stopped', durationMs: 0 });
  for (const step of steps) {
    const tool = step.tool === null ? undefined : s.tools.get(step.tool);
    const write = step.kind === 'action' && tool?.kind === 'write';
    if (step.status === 'started' && write && !tool.idempotent) {
      const lost = yield* s.settle(step, 'unknown', { error: 'the write started but its outcome was lost in a crash, and the run was stopped', durationMs: 0 });
      recordAction(s.state, lost, true);
    } else if (step.status === 'started' && write) {
      const lost = yield* s.settle(step, 'failed', { error: 'the write started but its outcome was lost in a crash, and the run was stopped; its outcome is unknown', result: UNSURE_RESULT, durationMs: 0 });
      recordAction(s.state, lost, true);
    } else if (step.status === 'waiting_approval') {
      const refused = yield* s.settle(step, 'rejected', { error: 'the run was stopped while the call waited for its approval', durationMs: 0 });
      recordAction(s.state, refused, write);
    } else if (step.status === 'started' || step.status === 'not_happened') {
      yield* s.settle(step, 'abandoned', { error: step.status === 'started' ? 'interrupted; the run was stopped' : 'declared not to have happened; not carried out: the run was stopped', result: step.result ?? undefined, durationMs: 0 });
    }
  }
}

/**
 * Carries out a recorded call again, through the whole gate: an interrupted read or idempotent
 * write, or a write an operator declared did not happen (`giveBack`: its lost attempt was
 * counted against the write budget, and is given back).
 */
async function* redo(s: ResumeScope, step: Step, giveBack: boolean): AsyncGenerator<TaskLoopEvent, RunResult | undefined, undefined> {
  const tool = s.tools.get(step.tool ?? '');
  if (giveBack && tool?.kind === 'write') s.state.usage.writeCalls = Math.max(0, s.state.usage.writeCalls - 1);
  // A declared not-happened write is a new write; an interrupted read or idempotent write goes on.
  const verdict = await s.gate(step.tool ?? '', step.args, undefined, giveBack ? undefined : 'continued');
  if (verdict.kind === 'park') {
    // Its earlier approval was used by the attempt that was lost: a person approves it again.
    s.state.usage.pending++;
    const approval = await s.runs.parkForApproval(s.fence, { runId: s.runId, stepId: step.id, tool: verdict.tool.name, args: verdict.args, fingerprint: verdict.fingerprint, expiresAt: null }, s.state.usage);
    yield { type: 'run_paused', reason: `waiting for approval ${approval.id}` };
    return { runId: s.runId, taskId: s.fence.taskId, phase: 'waiting_approval', stopReason: 'approval_required', envelope: null };
  }
  if (verdict.kind === 'refuse') {
    const refused = yield* s.settle(step, 'rejected', { error: verdict.reason, durationMs: 0 });
    recordAction(s.state, refused, tool?.kind === 'write');
    s.rejections.push({ tool: step.tool ?? '', reason: verdict.reason });
    if (verdict.end === undefined) return undefined;
    const fin = await s.finish(verdict.end.phase, verdict.end.stopReason, { message: verdict.reason });
    yield fin.event;
    return fin.result;
  }
  if (verdict.tool.kind === 'write') s.state.usage.writeCalls++;
  let target = step;
  if (giveBack && verdict.tool.kind === 'write' && !verdict.tool.idempotent) {
    // A write an operator declared did not happen is carried out under a new intent,
    // committed before it runs (with the declared step closed, in one transaction): a crash
    // during it leaves that intent started, which the next resume finds unknown, and the
    // declared step is not carried out a second time.
    target = await s.runs.beginStep(s.fence, {
      runId: s.runId, kind: 'action', tool: verdict.tool.name, args: verdict.args, ...(step.idempotencyKey === null ? {} : { idempotencyKey: step.idempotencyKey }),
      before: [{ finish: { stepId: step.id, status: 'abandoned', error: `declared not to have happened; carried out again as step ${s.state.lastSeq + 1}`, durationMs: 0, usage: { ...s.state.usage } } }],
    });
    s.state.lastSeq = target.seq;
    yield { type: 'step_started', step: target };
  }
  const out = await s.exec(verdict.tool.name, verdict.args, step.idempotencyKey ?? randomUUID());
  const lost = yield* unknownWrite(s, target, verdict.tool, out);
  if (lost !== undefined) return lost === STOPPED ? undefined : lost;
  if (!out.ok && out.aborted) {
    const cut = yield* settled(s, target, verdict.tool, out);
    if (isUnsure(cut)) recordAction(s.state, cut, true);
    return undefined; // the stop is handled at the top of the loop
  }
  await recordOnBreaker(s.runs, verdict.tool.name, out, s.breakerPolicy, s.fence.taskId);
  const done = yield* settled(s, target, verdict.tool, out);
  recordAction(s.state, done, verdict.tool.kind === 'write');
  return undefined;
}

/** The stop is handled at the top of the loop. */
export const STOPPED = Symbol('stopped');

/**
 * A write whose call ended without an answer and that is not safe to repeat (unsure.ts), the
 * loop's own or one carried out on resume: recorded `unknown`, and the run waits for a person
 * (its result), or goes on to its stop. Undefined for any other outcome.
 */
export async function* unknownWrite(
  s: Pick<ResumeScope, 'state' | 'runs' | 'fence' | 'breakerPolicy' | 'settle' | 'finish'>,
  step: Step,
  tool: Tool,
  out: ExecOutcome,
): AsyncGenerator<TaskLoopEvent, RunResult | typeof STOPPED | undefined, undefined> {
  if (out.ok || unsureWrite(tool, out) !== 'unknown') return undefined;
  await recordOnBreaker(s.runs, tool.name, out, s.breakerPolicy, s.fence.taskId);
  const lost = yield* s.settle(step, 'unknown', { error: unknownError(out.error), durationMs: out.durationMs });
  recordAction(s.state, lost, true);
  if (out.aborted) return STOPPED;
  const fin = await s.finish('waiting_input', 'unknown_side_effect', { message: `step ${lost.seq} (${tool.name}) may or may not have taken effect: ${out.error}` });
  yield fin.event;
  return fin.result;
}

/** Settles a call carried out here ok or failed; an idempotent write of unknown outcome keeps its key (unsure.ts). */
async function* settled(s: ResumeScope, step: Step, tool: Tool, out: ExecOutcome): AsyncGenerator<TaskLoopEvent, Step, undefined> {
  const done = yield* s.settle(step, out.ok ? 'ok' : 'failed', out.ok ? { result: out.result, durationMs: out.durationMs } : { ...failedSettle(tool, out), durationMs: out.durationMs });
  noteSettled(s.state.unsure, s.fence.taskId, done);
  return done;
}

/** Carries out, refuses or re-parks each call parked on an approval; returns a result when the run must end or park here. */
export async function* resumeParked(s: ResumeScope, steps: Step[]): AsyncGenerator<TaskLoopEvent, RunResult | undefined, undefined> {
  for (const parked of steps.filter((step) => step.status === 'waiting_approval')) {
    const approval = await s.runs.approvalForStep(parked.id);
    const tool = s.tools.get(parked.tool ?? '');
    if (approval !== undefined) s.state.trace.pendingIds.push(`approval-${approval.id}`);
    if (approval?.state === 'approved' && tool !== undefined) {
      // An approved call passes the whole gate again — the breaker may have opened and the
      // hooks may refuse since it was frozen — and must be exactly the approved call.
      const verdict = await s.gate(tool.name, approval.args, approval);
      if (verdict.kind !== 'run') {
        const reason = verdict.kind === 'refuse' ? verdict.reason : `approval ${approval.id} does not cover this call`;
        const refused = yield* s.settle(parked, 'rejected', { error: reason, durationMs: 0 });
        recordAction(s.state, refused, tool.kind === 'write');
        s.rejections.push({ tool: tool.name, reason });
        if (verdict.kind === 'refuse' && verdict.end !== undefined) {
          const fin = await s.finish(verdict.end.phase, verdict.end.stopReason, { message: reason });
          yield fin.event;
          return fin.result;
        }
        continue;
      }
      await s.runs.useApproval(s.fence, approval.id);
      if (tool.kind === 'write') s.state.usage.writeCalls++;
      const out = await s.exec(tool.name, verdict.args, parked.idempotencyKey ?? randomUUID());
      const lost = yield* unknownWrite(s, parked, tool, out);
      if (lost === STOPPED) continue;
      if (lost !== undefined) return lost;
      // Cut off by a stop or at the deadline (the top of the loop ends the run): no failure of the run's.
      const cut = !out.ok && (out.aborted || cutAtDeadline(out));
      await recordOnBreaker(s.runs, tool.name, out, s.breakerPolicy, s.fence.taskId);
      // (A call cut off by a stop is no failure of the tool's, as in the loop's own calls.)
      if (out.ok) s.state.usage.consecutiveFailures = 0;
      else if (!cut) s.state.usage.consecutiveFailures++;
      const done = yield* settled(s, parked, tool, out);
      recordAction(s.state, done, tool.kind === 'write');
      continue;
    }
    if (approval?.state === 'used' && tool !== undefined) {
      // The approved call began (its approval was used) and the process died before its step
      // was settled: its outcome is lost, like any interrupted write. A read or idempotent tool
      // is carried out again under its key (still the approved call, through the gate); any
      // other write is an unknown side effect that a person reconciles.
      if (tool.kind === 'read' || tool.idempotent) {
        const verdict = await s.gate(tool.name, approval.args, { ...approval, state: 'approved' }, 'continued');
        if (verdict.kind === 'run') {
          if (tool.kind === 'write') s.state.usage.writeCalls++;
          const out = await s.exec(tool.name, verdict.args, parked.idempotencyKey ?? randomUUID());
          const done = yield* settled(s, parked, tool, out);
          recordAction(s.state, done, tool.kind === 'write');
          continue;
        }
      } else {
        s.state.usage.writeCalls++;
        const lost = yield* s.settle(parked, 'unknown', { error: `the approved call began but its outcome was lost in a crash (approval ${approval.id} is used); reconcile it before resuming`, durationMs: 0 });
        recordAction(s.state, lost, true);
        const fin = await s.finish('waiting_input', 'unknown_side_effect', { message: `step ${lost.seq} (${tool.name}) may or may not have taken effect` });
        yield fin.event;
        return fin.result;
      }
    }
    if (approval?.state === 'pending' && !s.stopped()) {
      await s.runs.reparkForApproval(s.fence, approval);
      yield { type: 'run_paused', reason: `still waiting for approval ${approval.id}` };
      return { runId: s.runId, taskId: s.fence.taskId, phase: 'waiting_approval', stopReason: 'approval_required', envelope: null };
    }
    const expired = approval?.state === 'expired';
    const degrade = expired && s.card.approval?.on_expiry === 'degraded';
    const reason = degrade ? DEGRADED : approval === undefined ? 'its approval is missing' : `approval ${approval.id} ${approval.state}${approval.reason === null ? '' : `: ${approval.reason}`}`;
    const refused = yield* s.settle(parked, 'rejected', { error: reason, durationMs: 0 });
    recordAction(s.state, refused, tool?.kind === 'write');
    if (degrade) {
      s.state.degraded = true;
      s.rejections.push({ tool: parked.tool ?? '', reason });
    } else if (!s.stopped()) {
      // (A stopped run is cancelled at the top of the loop instead.)
      const fin = expired ? await s.finish('failed', 'approval_expired', { message: reason }) : await s.finish('rejected', 'approval_rejected', { message: reason });
      yield fin.event;
      return fin.result;
    }
  }
  return undefined;
}
