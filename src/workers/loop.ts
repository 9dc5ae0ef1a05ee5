/**
 * The task loop (DESIGN §5, seeds 000/003/004): observe → decide → gate → execute, with
 * step, failure, budget and no-progress guards, stop and pause from any process, and
 * acceptance as the only road to `completed`. One generator run drives one run of one
 * claimed task; every step is a persisted, fenced checkpoint.
 */
import { randomUUID } from 'node:crypto';
import { type ControlState, type Step, type TaskCard, checkCardAuthor, isEngineError, parseDuration } from '../engine/index.js';
import { budgetOfTask, exhausted } from './budget.js';
import { checkCardWithTools, visionRefusal } from './card-check.js';
import { type LoopState, rebuildState, recordAction, summaryOf } from './loop-state.js';
import { type ResumeScope, resumeDecided, resumeInterrupted, resumeParked } from './loop-resume.js';
import { type AnswerCounts, applyRestartPolicy } from './restart-policy.js';
import { type LoopContext, type RunResult, type TaskLoopEvent, changeOrTimeout } from './loop-context.js';
import { createFinisher, progressOf } from './loop-finish.js';
import { createRunCalls } from './loop-calls.js';
import { createDetectors } from './detectors.js';
import { splitImage } from './images.js';
import { type Observation, type Planner, PlannerError } from './planner.js';
import { planView, replan } from './plan.js';
import { createHookRegistry } from '../plugins/hooks.js';

const PAUSE_RECHECK_MS = 1000;

export type { LoopContext, RunResult, TaskLoopEvent } from './loop-context.js';

export async function* runTaskLoop(ctx: LoopContext): AsyncGenerator<TaskLoopEvent, RunResult, undefined> {
  const { runs, fence, tools } = ctx;
  const hooks = ctx.hooks ?? createHookRegistry();
  const checked = checkCardWithTools(ctx.task.card, tools);
  const card = checked.ok ? checked.card : undefined;
  // One signal for the run: tool calls, planner calls and every hook's own signal hang off it.
  const abort = new AbortController();
  const opened = ctx.opened ?? (await runs.openRun(fence, budgetOfTask(ctx.task.card, ctx.now())));
  const run = opened.run;
  yield opened.resumed ? { type: 'run_resumed', run, reason: 'claimed again' } : { type: 'run_started', run };
  await hooks.emit('run_start', { taskId: fence.taskId, runId: run.id, agent: fence.agent, resumed: opened.resumed, signal: abort.signal });

  const crashed = opened.resumed && opened.resumedFrom === 'running';
  const state: LoopState = rebuildState(run, opened.steps, card ?? ({ loop: { repeat_limit: 3, idle_rounds: 6 } } as TaskCard), tools, crashed);
  const progress = () => progressOf(state);
  const finish = createFinisher({ run, fence, runs, hooks, state, signal: abort.signal });

  if (card === undefined) {
    const fin = await finish('rejected', 'invalid_card', { message: `invalid card: ${checked.ok ? '' : checked.problems.join('; ')}` });
    yield fin.event;
    return fin.result;
  }

  // Defence in depth: powers on a card that no operator wrote were refused at creation; a
  // task written past TaskManager is refused again here, before any step.
  const authored = checkCardAuthor(ctx.task.card, { role: ctx.task.creatorRole, id: ctx.task.creator });
  if (!authored.ok) {
    const fin = await finish('rejected', 'forbidden_card', { message: `${authored.code}: ${authored.message}` });
    yield fin.event;
    return fin.result;
  }

  const blind = visionRefusal(card, tools);
  if (blind !== null) {
    const fin = await finish('rejected', 'model_lacks_vision', { message: `${blind.code}: ${blind.message}` });
    yield fin.event;
    return fin.result;
  }

  let planner: Planner;
  try {
    planner = ctx.planner(card, state.decisions);
  } catch (err) {
    const fin = await finish('failed', 'planner_unavailable', { message: err instanceof Error ? err.message : String(err) });
    yield fin.event;
    return fin.result;
  }

  // Stop from any process: a control change aborts the in-flight tool or planner call.
  let control: ControlState = await runs.getControl(fence.taskId);
  const refreshControl = async () => {
    control = await runs.getControl(fence.taskId);
    if (control === 'stopped') abort.abort('user_stop');
  };
  // `control` changes under a watcher callback; read it through a call so checks are fresh.
  const current = (): ControlState => control;
  const unwatch = ctx.watch(() => void refreshControl().catch(() => undefined));
  const allowedTools = card.allowed_tools.flatMap((name) => {
    const tool = tools.get(name);
    return tool === undefined ? [] : [{ name, description: tool.description, kind: tool.kind, parameters: tool.parameters }];
  });
  let rejections: Array<{ tool: string; reason: string }> = [];
  const answers: AnswerCounts = { blocked: 0, weak: 0 };

  const { exec, gate: gateCall, cardRead, accept } = createRunCalls({ ctx, card, run, fence, state, hooks, signal: abort.signal, finish });

  async function* step(kind: Step['kind'], tool: string | null, args: unknown, key?: string): AsyncGenerator<TaskLoopEvent, Step, undefined> {
    const started = await runs.beginStep(fence, { runId: run.id, kind, tool: tool ?? undefined, args, idempotencyKey: key });
    state.lastSeq = started.seq;
    yield { type: 'step_started', step: started };
    return started;
  }
  async function* settle(started: Step, status: Step['status'] & ('ok' | 'failed' | 'rejected' | 'unknown' | 'abandoned'), out: { result?: unknown; error?: string; durationMs: number; tokens?: number; screen?: Uint8Array }): AsyncGenerator<TaskLoopEvent, Step, undefined> {
    const finished = await runs.finishStep(fence, {
      stepId: started.id,
      status,
      result: out.result,
      error: out.error,
      durationMs: out.durationMs,
      tokens: out.tokens,
      screen: out.screen,
      usage: state.usage,
      eventData: { progress: progress() },
    });
    state.summaries.push(summaryOf(finished));
    yield { type: 'step_finished', step: finished };
    return finished;
  }
  const failure = () => {
    state.usage.consecutiveFailures++;
    return state.usage.consecutiveFailures >= run.budget.maxFailures;
  };

  try {
    const scope: ResumeScope = {
      state, tools, runs, fence, card, runId: run.id, breakerPolicy: ctx.breakerPolicy, rejections,
      exec, gate: gateCall, settle, finish, accept, stopped: () => current() === 'stopped',
    };
    const early =
      (yield* resumeDecided(scope)) ?? (yield* resumeInterrupted(scope, opened.steps)) ?? (yield* resumeParked(scope, opened.steps));
    if (early !== undefined) return early;

    for (;;) {
      if (abort.signal.aborted || current() === 'stopped') {
        const fin = await finish('cancelled', 'user_stop');
        yield fin.event;
        return fin.result;
      }
      if (current() === 'paused') {
        await runs.setPaused(fence, run.id, true, 'user_pause');
        yield { type: 'run_paused', reason: 'user_pause' };
        while (current() === 'paused' && ctx.draining?.() !== true) await changeOrTimeout(ctx, PAUSE_RECHECK_MS).then(refreshControl);
        if (current() !== 'stopped' && ctx.draining?.() !== true) {
          await runs.setPaused(fence, run.id, false, 'user_resume');
          yield { type: 'run_resumed', run, reason: 'user_resume' };
        }
        continue;
      }
      if (ctx.draining?.() === true) {
        await runs.releaseRun(fence, run.id, 'daemon shutting down');
        return { runId: run.id, taskId: fence.taskId, phase: 'released', stopReason: 'shutdown', envelope: null };
      }
      const spent = exhausted(run.budget, state.usage, ctx.now());
      if (spent !== null) {
        const fin = await finish('budget_exhausted', spent);
        yield fin.event;
        return fin.result;
      }

      // observe
      let observation: Observation = { tool: null, ok: true, data: null };
      if (card.observe !== undefined) {
        const { tool, args } = card.observe;
        const started = yield* step('observe', tool, args);
        const out = await cardRead(tool, args);
        if (!out.ok && out.end !== undefined) {
          yield* settle(started, 'rejected', { error: out.error, durationMs: 0 });
          const fin = await finish(out.end.phase, out.end.stopReason, { message: out.error });
          yield fin.event;
          return fin.result;
        }
        if (out.ok) {
          // max_failures counts consecutive failed observations, decisions and actions; only
          // a successful action resets it. A run that sees fine but never gets anything done
          // is not healthy: a successful observation neither counts nor resets.
          state.trace.usedTools.push(tool);
          const { kept, imagePng } = splitImage(out.result);
          // The run keeps the latest screen it saw, for operators (GET /api/runs/:id/screen).
          yield* settle(started, 'ok', { result: kept, durationMs: out.durationMs, screen: imagePng === undefined ? undefined : Buffer.from(imagePng, 'base64') });
          observation = imagePng === undefined ? { tool, ok: true, data: kept } : { tool, ok: true, data: kept, imagePng };
        } else {
          const spentFailures = failure();
          yield* settle(started, 'failed', { error: out.error, durationMs: out.durationMs });
          if (spentFailures) {
            const fin = await finish('failed', 'max_failures', { message: out.error });
            yield fin.event;
            return fin.result;
          }
          continue;
        }
      }

      // decide
      const decideStep = yield* step('decide', null, null);
      const t0 = performance.now();
      let decided;
      try {
        const plan = state.plan.items.length > 0 ? state.plan.items.map(planView) : undefined;
        decided = await planner.decide({ goal: card.goal, steps: state.summaries, observation, allowedTools, rejections, signal: abort.signal, ...(plan ? { plan } : {}) });
      } catch (err) {
        state.usage.steps++;
        const message = err instanceof PlannerError || isEngineError(err) ? err.message : `planner: ${String(err)}`;
        const spentFailures = failure();
        yield* settle(decideStep, 'failed', { error: message, durationMs: performance.now() - t0 });
        if (spentFailures) {
          const fin = await finish('failed', 'max_failures', { message });
          yield fin.event;
          return fin.result;
        }
        continue;
      }
      const tokens = (decided.usage?.promptTokens ?? 0) + (decided.usage?.completionTokens ?? 0);
      state.usage.steps++;
      state.usage.tokens += tokens;
      state.usage.cost += decided.usage?.cost ?? 0;
      state.decisions++;
      rejections = [];
      const { decision } = decided;
      yield* settle(decideStep, 'ok', { result: decision, durationMs: performance.now() - t0, tokens });

      // The restart policy: an answer a verifier blocks or finds weak is not acted on.
      const policy = await applyRestartPolicy({ hooks, runs, fence, runId: run.id, goal: card.goal, decision, answers, signal: abort.signal });
      if (policy.kind === 'give_up') {
        const fin = await finish('waiting_input', 'restart_limit', { message: policy.message });
        yield fin.event;
        return fin.result;
      }
      if (policy.kind === 'restart') {
        // Cleared working memory: the planner starts over from the goal; budgets keep their counts.
        state.summaries = [];
        state.detectors = createDetectors(card.loop.repeat_limit, card.loop.idle_rounds);
        rejections = [policy.rejection];
        await hooks.emit('session_reset', { taskId: fence.taskId, runId: run.id, reason: policy.cause, signal: abort.signal });
        continue;
      }
      if (policy.kind === 'skip') {
        rejections.push(policy.rejection);
        continue;
      }

      if (decision.action === 'fail') {
        const fin = await finish('failed', 'planner_fail', { message: decision.reason });
        yield fin.event;
        return fin.result;
      }
      if (decision.action === 'done') {
        const fin = await accept();
        yield fin.event;
        return fin.result;
      }

      if (decision.action === 'replan') {
        const outcome = replan(state.plan, decision.card);
        if (!outcome.ok) {
          const reason = outcome.problems.join('; ');
          state.trace.rejectedCalls.push({ tool: 'replan', args: decision.card, reason, seq: decideStep.seq });
          rejections.push({ tool: 'replan', reason });
        }
        continue;
      }

      // gate → execute. The gate decides before the action step is written, and the step
      // records the arguments it admitted: a `started` action step is always one the gate let
      // through, so a resume may carry it out as recorded. A crash during the gate leaves the
      // decision as the run's last step, and it is taken again (loop-state.ts cutOff).
      const key = randomUUID();
      const verdict = await gateCall(decision.tool, decision.args);
      const actionStep = yield* step('action', decision.tool, verdict.kind === 'refuse' ? decision.args : verdict.args, key);
      if (verdict.kind === 'refuse') {
        const refused = yield* settle(actionStep, 'rejected', { error: verdict.reason, durationMs: 0 });
        rejections.push({ tool: decision.tool, reason: verdict.reason });
        const detector = recordAction(state, refused, false);
        const end = verdict.end ?? (detector !== null ? { phase: 'blocked' as const, stopReason: 'loop_detected' } : undefined);
        if (end !== undefined) {
          const fin = await finish(end.phase, end.stopReason, { message: verdict.end !== undefined ? verdict.reason : `no-progress detector ${detector} fired` });
          yield fin.event;
          return fin.result;
        }
        continue;
      }
      const write = verdict.tool.kind === 'write';
      if (verdict.kind === 'park') {
        state.usage.pending++;
        const approval = await runs.parkForApproval(fence, {
          runId: run.id,
          stepId: actionStep.id,
          tool: verdict.tool.name,
          args: verdict.args,
          fingerprint: verdict.fingerprint,
          expiresAt: card.approval?.expires_in === undefined ? null : ctx.now() + parseDuration(card.approval.expires_in),
        }, state.usage);
        yield { type: 'run_paused', reason: `waiting for approval ${approval.id}` };
        return { runId: run.id, taskId: fence.taskId, phase: 'waiting_approval', stopReason: 'approval_required', envelope: null };
      }
      const out = await exec(verdict.tool.name, verdict.args, key);
      await hooks.emit('tool_after', {
        tool: verdict.tool.name, kind: verdict.tool.kind, risk: verdict.tool.risk, args: verdict.args, taskId: fence.taskId, runId: run.id,
        agent: fence.agent, card: ctx.task.card, signal: abort.signal, services: ctx.services,
        ok: out.ok, ...(out.ok ? { result: out.result } : { error: out.error }),
      });
      if (write) state.usage.writeCalls++;
      if (!out.ok && out.aborted) {
        yield* settle(actionStep, 'failed', { error: out.error, durationMs: out.durationMs });
        continue; // the stop is handled at the top of the loop
      }
      await runs.breakerRecord(verdict.tool.name, out.ok, ctx.breakerPolicy, fence.taskId);
      let spentFailures = false;
      if (out.ok) state.usage.consecutiveFailures = 0;
      else spentFailures = failure();
      const done = yield* settle(actionStep, out.ok ? 'ok' : 'failed', out.ok ? { result: splitImage(out.result).kept, durationMs: out.durationMs } : { error: out.error, durationMs: out.durationMs });
      const detector = recordAction(state, done, write);
      const failedItem = state.plan.items.find((i) => i.status === 'failed');
      if (failedItem !== undefined) {
        const fin = await finish('failed', 'plan_item_failed', { message: `plan item ${failedItem.id} failed ${failedItem.failures} times (${failedItem.transient} retries allowed): ${out.ok ? '' : out.error}` });
        yield fin.event;
        return fin.result;
      }
      if (spentFailures) {
        const fin = await finish('failed', 'max_failures', { message: out.ok ? undefined : out.error });
        yield fin.event;
        return fin.result;
      }
      if (detector !== null) {
        const fin = await finish('blocked', 'loop_detected', { message: `no-progress detector ${detector} fired` });
        yield fin.event;
        return fin.result;
      }
    }
  } finally {
    unwatch();
    abort.abort('loop ended');
  }
}
