/**
 * How a run makes its calls: every tool call the planner proposes, and the card's own reads
 * (observe, final_state), pass the one gate (gate.ts) before they execute; acceptance reads
 * the final state through the same path. Task tools act for the card's author.
 */
import { randomUUID } from 'node:crypto';
import { type Actor, type Approval, type FinalPhase, type Fence, type Run, type TaskCard, type TaskMove, asAgent, mayUseCardPowers } from '../engine/index.js';
import type { HookRegistry } from '../plugins/hooks.js';
import { runAcceptance } from './acceptance.js';
import { type ExecOutcome, executeTool, recordOnBreaker } from './execute.js';
import { type GateVerdict, gate } from './gate.js';
import type { LoopContext } from './loop-context.js';
import type { Finish } from './loop-finish.js';
import type { LoopState } from './loop-state.js';
import { checkPlanAction } from './plan.js';
import type { RunTrace } from './tracing.js';

export interface RunCallsScope {
  ctx: LoopContext;
  card: TaskCard;
  run: Run;
  fence: Fence;
  state: LoopState;
  hooks: HookRegistry;
  signal: AbortSignal;
  /**
   * Reads the task's control now (aborting `signal` on a stop). Asked before a write is
   * called: a stop committed before the write's step began is then always seen, though the
   * watcher that reports it may not have run yet (the thread was busy, or the process was
   * stopped between the two commits), so no write starts after a stop.
   */
  recheckControl: () => Promise<void>;
  finish: Finish;
  trace: RunTrace;
}

export type CardReadOutcome = ExecOutcome & { end?: { phase: 'failed' | 'budget_exhausted'; stopReason: string } };

export interface RunCalls {
  /** Runs a tool with arguments the gate admitted (they pass the tool's schema once more). */
  /**
   * A read is cut off at `cutAt` (ms since the epoch, the run's clock; by default the run's
   * deadline, null: none) with errorType `deadline`; a write started before the deadline runs
   * to its own timeout (cutting it would leave its outcome unknown).
   */
  exec(tool: string, args: Record<string, unknown>, key: string, cutAt?: number | null): Promise<ExecOutcome>;
  /**
   * The gate for a planner's call (`of: 'planner'`, narrowed by the plan), the card's own read
   * (`'card'`), or a begun call the resume carries on under its key (`'continued'`: planner's
   * rules, but no deadline refusal).
   */
  gate(tool: string, rawArgs: unknown, approval?: Approval, of?: 'planner' | 'card' | 'continued'): Promise<GateVerdict>;
  /** A card's own read (observe, final_state): gated, executed, and recorded on its breaker. */
  cardRead(tool: string, args: Record<string, unknown>, cutAt?: number | null): Promise<CardReadOutcome>;
  /** The planner said done: acceptance over the final state decides how the run ends. */
  accept(): ReturnType<Finish>;
}

/**
 * One write at a time in a thread goes from its look at the control to its call. A process
 * frozen (or busy) between the two and thawed after a stop then starts at most one write the
 * stop did not see, whatever the number of runs it holds: without the turn, every run whose
 * look had resolved with others (a group commit's batch, a shared read) called after the stop.
 * Held from the look until the tool has started, not until it ends: a SQLite look is ~1 us; a
 * PostgreSQL one is a round trip, which caps a thread at a few thousand write calls a second.
 */
let writeTurn: Promise<void> = Promise.resolve();
async function inWriteTurn<T>(lookThenStart: () => Promise<{ started: Promise<T> }>): Promise<T> {
  const before = writeTurn;
  let release!: () => void;
  writeTurn = new Promise<void>((r) => (release = r));
  try {
    await before;
    const { started } = await lookThenStart();
    release();
    return await started;
  } finally {
    release();
  }
}

/** How long past its run's deadline the card's final_state reads may run, at most (see accept). */
export const ACCEPT_GRACE_MS = 30_000;

export function createRunCalls(s: RunCallsScope): RunCalls {
  const { ctx, card, run, fence, state, hooks, signal, finish, trace } = s;
  // The task tools act as an agent whoever wrote the card, since the calls are the model's:
  // an agent's card as its author (it reads, creates and cancels only as its author may),
  // anyone else's (an operator's, a reviewer's, the system's) as the runner that holds the
  // claim. Never as the author's own role: a reviewer's card acting as the reviewer let its
  // model read every task, pass other agents' reviews and create at any priority.
  const actingFor: Actor = ctx.task.creatorRole === 'agent' ? { id: ctx.task.creator, role: 'agent' } : asAgent(fence.agent);

  const exec: RunCalls['exec'] = async (toolName, args, key, cutAt = run.budget.deadlineAt) => {
    const tool = ctx.tools.get(toolName)!;
    const span = trace.toolCall(tool, key);
    const out = await span.run(async (): Promise<ExecOutcome> => {
      let parsed: Record<string, unknown>;
      try {
        parsed = tool.parse(args);
      } catch (err) {
        return { ok: false, error: err instanceof Error ? err.message : String(err), durationMs: 0, aborted: false, errorType: 'invalid_args' };
      }
      const call = (cutAfterMs?: number) => executeTool(tool, parsed, { taskId: fence.taskId, runId: run.id, agent: fence.agent, actor: actingFor, idempotencyKey: key, services: ctx.services }, signal, cutAfterMs);
      if (tool.kind === 'read') return call(cutAt === null ? undefined : cutAt - ctx.now());
      return inWriteTurn(async () => {
        await s.recheckControl();
        return { started: call() };
      });
    });
    span.end(out);
    return out;
  };

  const gateCall: RunCalls['gate'] = (toolName, rawArgs, approval, of = 'planner') =>
    gate({
      card,
      tools: ctx.tools,
      runs: ctx.runs,
      breakerPolicy: ctx.breakerPolicy,
      budget: run.budget,
      usage: state.usage,
      now: ctx.now,
      toolName,
      rawArgs,
      // The current plan item narrows what the planner may call, not the card's own reads.
      planRefusal: of === 'card' ? null : checkPlanAction(state.plan, toolName),
      continued: of === 'continued',
      hooks,
      call: { taskId: fence.taskId, runId: run.id, agent: fence.agent, card: ctx.task.card, signal, services: ctx.services },
      ...(approval === undefined ? {} : { approval }),
    });

  // A breaker that is open or a tool_before hook that refuses stops the card's reads as it
  // stops the planner's calls.
  const cardRead: RunCalls['cardRead'] = async (toolName, args, cutAt) => {
    const verdict = await gateCall(toolName, args, undefined, 'card');
    if (verdict.kind === 'refuse') return { ok: false, error: verdict.reason, durationMs: 0, aborted: false, ...(verdict.end === undefined ? {} : { end: verdict.end }) };
    if (verdict.kind === 'park') return { ok: false, error: `${toolName} needs a person's approval, which a card's own read cannot wait for`, durationMs: 0, aborted: false };
    const out = await exec(verdict.tool.name, verdict.args, randomUUID(), cutAt);
    await recordOnBreaker(ctx.runs, verdict.tool.name, out, ctx.breakerPolicy, fence.taskId);
    return out;
  };

  const accept: RunCalls['accept'] = async () => {
    // The card's final_state reads judge the work done by the deadline, so they may run past
    // it: by as long again as the run had, at most ACCEPT_GRACE_MS, all of them together (a
    // card lists up to a hundred), and the ones still running then are cut off (unreachable).
    // A run without a deadline gives them ACCEPT_GRACE_MS from now: without it, a card's reads
    // had no bound on their time at all.
    const { deadlineAt } = run.budget;
    const until = deadlineAt === null ? ctx.now() + ACCEPT_GRACE_MS : Math.max(deadlineAt, ctx.now()) + Math.min(ACCEPT_GRACE_MS, Math.max(0, deadlineAt - run.startedAt));
    const report = await runAcceptance({
      card,
      tools: ctx.tools,
      usedTools: state.trace.usedTools,
      allowCommands: mayUseCardPowers(ctx.task.creatorRole),
      read: (tool, args) => cardRead(tool, args, until),
      signal,
    });
    // A run that had to skip a high-risk call (its approval expired, the card says degrade)
    // ends degraded only when all it missed is what that call would have done (the checks
    // the card's approval.covers names); anything else it missed fails it, as without the skip.
    const covers = card.approval?.covers ?? [];
    const degraded = report.verdict === 'failed' && state.degraded && report.unreachable.length === 0 && report.failed.every((id) => covers.includes(id));
    const phase: FinalPhase = report.verdict === 'passed' ? 'completed' : report.verdict === 'await_manual' ? 'waiting_input' : degraded ? 'degraded' : 'failed';
    const stopReason = report.verdict === 'passed' ? 'accepted' : report.verdict === 'await_manual' ? 'await_manual' : degraded ? 'approval_expired' : 'acceptance_failed';
    const moves: TaskMove[] | undefined = report.verdict === 'await_manual' ? [{ to: 'review', by: 'assignee', reason: 'manual acceptance items' }] : undefined;
    return finish(phase, stopReason, { acceptance: report, moves, message: report.verdict === 'failed' ? `acceptance failed: ${[...report.failed, ...report.unreachable].join('; ')}` : undefined });
  };

  return { exec, gate: gateCall, cardRead, accept };
}
