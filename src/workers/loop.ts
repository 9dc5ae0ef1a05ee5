/**
 * The task loop (DESIGN §5, seeds 000/003/004): observe → decide → gate → execute, with
 * step, failure, budget and no-progress guards, stop and pause from any process, and
 * acceptance as the only road to `completed`. One generator run drives one run of one
 * claimed task; every step is a fenced checkpoint, written through the run's journal
 * (journal.ts: which writes share a transaction). The phases are in loop-phases.ts.
 */
import { type CardCheck, type ControlState, type OpenRunResult, type Step, type TaskCard } from '../engine/index.js';
import { budgetOfTask, exhausted } from './budget.js';
import { authorRefusal, checkCardWithTools, visionRefusal } from './card-check.js';
import { createJournal } from './journal.js';
import { type LoopState, rebuildState } from './loop-state.js';
import { resumeDecided, resumeInterrupted, resumeParked, settleStopped } from './loop-resume.js';
import { type LoopContext, type RunResult, type TaskLoopEvent, changeOrTimeout } from './loop-context.js';
import { createFinisher, progressOf } from './loop-finish.js';
import { createRunCalls } from './loop-calls.js';
import { AGAIN, Ended, type SettleOut, type SettleStatus, act, end, decide, observe, settle } from './loop-phases.js';
import type { RunScope } from './loop-scope.js';
import { createHookRegistry } from '../plugins/hooks.js';
import { type RunTrace, traceRun } from './tracing.js';

const PAUSE_RECHECK_MS = 1000;
/** How long a run may go between turns of its thread's event loop. */
const TURN_MS = 1;
/** One turn of the event loop: timers, I/O and messages waiting now run before this resolves. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export type { LoopContext, RunResult, TaskLoopEvent } from './loop-context.js';

export async function* runTaskLoop(ctx: LoopContext): AsyncGenerator<TaskLoopEvent, RunResult, undefined> {
  const opened = ctx.opened ?? (await ctx.runs.openRun(ctx.fence, budgetOfTask(ctx.task.card, ctx.now())));
  // The run's span in this process (tracing.ts); a run resumed elsewhere is another span with the same run id.
  const trace = traceRun(opened.run, ctx.fence.agent, { resumed: opened.resumed, from: opened.resumedFrom });
  try {
    const result = yield* loop({ ...ctx, opened }, trace);
    trace.end(result);
    return result;
  } catch (err) {
    trace.fail(err);
    throw err;
  } finally {
    trace.end({ phase: 'abandoned', stopReason: 'not driven to its end' }); // a no-op unless the caller stopped pulling events
  }
}

async function* loop(ctx: LoopContext & { opened: OpenRunResult }, trace: RunTrace): AsyncGenerator<TaskLoopEvent, RunResult, undefined> {
  const { fence, tools, opened } = ctx;
  const hooks = ctx.hooks ?? createHookRegistry();
  const checked = checkCardWithTools(ctx.task.card, tools);
  const card = checked.ok ? checked.card : undefined;
  // One signal for the run: tool calls, planner calls and every hook's own signal hang off it.
  const abort = new AbortController();
  const { run } = opened;
  const journal = createJournal(ctx.runs, fence);
  const runs = journal.runs;
  yield opened.resumed ? { type: 'run_resumed', run, reason: 'claimed again' } : { type: 'run_started', run };
  await hooks.emit('run_start', { taskId: fence.taskId, runId: run.id, agent: fence.agent, resumed: opened.resumed, signal: abort.signal });

  const crashed = opened.resumed && opened.resumedFrom === 'running';
  const state: LoopState = rebuildState(run, opened.steps, card ?? ({ loop: { repeat_limit: 3, idle_rounds: 6 } } as TaskCard), tools, crashed);
  const finish = createFinisher({ run, fence, runs, hooks, state, signal: abort.signal });
  const refusal = unrunnable(ctx, checked);
  if (refusal !== null || card === undefined) {
    const fin = await finish('rejected', refusal?.stopReason ?? 'invalid_card', { message: refusal?.message });
    yield fin.event;
    return fin.result;
  }
  let planner;
  try {
    planner = ctx.planner(card, state.decisions);
  } catch (err) {
    const fin = await finish('failed', 'planner_unavailable', { message: err instanceof Error ? err.message : String(err) });
    yield fin.event;
    return fin.result;
  }

  // Stop from any process: a control change aborts the in-flight tool or planner call.
  let control: ControlState = await runs.getControl(fence.taskId);
  const refreshControl = async (fresh = false) => {
    control = await runs.getControl(fence.taskId, fresh ? { fresh } : undefined);
    if (control === 'stopped') abort.abort('user_stop');
  };
  const unwatch = ctx.watch(() => void refreshControl().catch(() => undefined));
  const calls = createRunCalls({ ctx: { ...ctx, runs }, card, run, fence, state, hooks, signal: abort.signal, recheckControl: () => refreshControl(true), finish, trace });
  const r: RunScope = {
    ctx, card, run, fence, state, hooks, runs, journal, signal: abort.signal, planner, calls, finish, trace,
    allowedTools: card.allowed_tools.flatMap((name) => {
      const tool = tools.get(name);
      return tool === undefined ? [] : [{ name, description: tool.description, kind: tool.kind, parameters: tool.parameters }];
    }),
    rejections: [],
    answers: { blocked: 0, weak: 0 },
    // `control` changes under a watcher callback; read it through a call so checks are fresh.
    control: () => control,
    progress: () => progressOf(state),
  };

  try {
    const resumed = yield* resume(r, opened.steps);
    if (resumed !== undefined) return resumed;
    let lastTurn = performance.now();
    for (;;) {
      // Between steps, at least once a millisecond, the thread's event loop turns: a control
      // change from another process (a file event, a NOTIFY), a drain message and the
      // thread's other runs get their turn even when no call of this run did I/O (fast
      // reads, whose steps the journal holds back, write nothing that would look at the
      // control). Not at every step: a turn costs ~30 us, a fast read step ~150.
      if (performance.now() - lastTurn >= TURN_MS) {
        await turn();
        lastTurn = performance.now();
      }
      // Between steps: stop, pause, drain, budgets.
      if (abort.signal.aborted || control === 'stopped') return (yield* end(r, 'cancelled', 'user_stop')).result;
      if (control === 'paused') {
        await runs.setPaused(fence, run.id, true, 'user_pause');
        yield { type: 'run_paused', reason: 'user_pause' };
        // A pause does not stop the run's clock: at its deadline a paused run ends (it would
        // end there once resumed anyway), and gives back its seat, instead of holding it for
        // as long as whoever paused it (the task's own agent may) cares to.
        const { deadlineAt } = run.budget;
        const beforeDeadline = () => deadlineAt === null || ctx.now() < deadlineAt;
        while (r.control() === 'paused' && ctx.draining?.() !== true && beforeDeadline()) {
          const wait = deadlineAt === null ? PAUSE_RECHECK_MS : Math.max(1, Math.min(PAUSE_RECHECK_MS, deadlineAt - ctx.now()));
          await changeOrTimeout(ctx, wait).then(() => refreshControl());
        }
        if (!beforeDeadline() && r.control() === 'paused' && ctx.draining?.() !== true) return (yield* end(r, 'budget_exhausted', 'deadline')).result;
        // A drain releases the run as it is (still paused: where it resumes, it waits again);
        // going round would find it paused and pause it again, a write per turn, forever.
        if (ctx.draining?.() !== true || r.control() === 'stopped') {
          if (r.control() !== 'stopped') {
            await runs.setPaused(fence, run.id, false, 'user_resume');
            yield { type: 'run_resumed', run, reason: 'user_resume' };
          }
          continue;
        }
      }
      if (ctx.draining?.() === true) {
        await runs.releaseRun(fence, run.id, 'daemon shutting down');
        return { runId: run.id, taskId: fence.taskId, phase: 'released', stopReason: 'shutdown', envelope: null };
      }
      const spent = exhausted(run.budget, state.usage, ctx.now());
      if (spent !== null) return (yield* end(r, 'budget_exhausted', spent)).result;

      const observation = yield* observe(r);
      if (observation instanceof Ended) return observation.result;
      if (observation === AGAIN) continue;
      const decided = yield* decide(r, observation);
      if (decided instanceof Ended) return decided.result;
      if (decided === AGAIN) continue;
      if (decided.decision.action !== 'tool') continue;
      const acted = yield* act(r, decided.decision);
      if (acted instanceof Ended) return acted.result;
    }
  } finally {
    unwatch();
    abort.abort('loop ended');
    await journal.close().catch(() => undefined);
  }
}

/** Settles what the previous attempt of a resumed run left open (loop-resume.ts). */
async function* resume(r: RunScope, steps: Step[]): AsyncGenerator<TaskLoopEvent, RunResult | undefined, undefined> {
  const scope = {
    state: r.state, tools: r.ctx.tools, runs: r.runs, fence: r.fence, card: r.card, runId: r.run.id, breakerPolicy: r.ctx.breakerPolicy, rejections: r.rejections,
    // A call carried out again belongs to its step, begun by an earlier attempt: it gets a step span here.
    exec: (tool: string, args: Record<string, unknown>, key: string) => {
      r.trace.openStep('action');
      return r.calls.exec(tool, args, key);
    },
    gate: r.calls.gate, accept: r.calls.accept, finish: r.finish, stopped: () => r.control() === 'stopped',
    settle: (started: Step, status: SettleStatus, out: SettleOut) => settle(r, started, status, out),
  };
  // Stopped before it was claimed again (a crash between a stop and its ending): what was left
  // open is settled as it stands, nothing is carried out again, and the run ends cancelled.
  if (r.control() === 'stopped') {
    yield* settleStopped(scope, steps);
    return undefined;
  }
  return (yield* resumeDecided(scope)) ?? (yield* resumeInterrupted(scope, steps)) ?? (yield* resumeParked(scope, steps));
}

/** Why a card cannot run at all (the run ends rejected before any step), or null. */
function unrunnable(ctx: LoopContext, checked: CardCheck): { stopReason: string; message: string } | null {
  if (!checked.ok) return { stopReason: 'invalid_card', message: `invalid card: ${checked.problems.join('; ')}` };
  // Defence in depth: powers on a card that no operator wrote were refused at creation; a
  // task written past TaskManager is refused again here, and so are operator-only tools.
  const forbidden = authorRefusal(ctx.task.card, checked.card, { role: ctx.task.creatorRole, id: ctx.task.creator }, ctx.tools);
  if (forbidden !== null) return { stopReason: 'forbidden_card', message: `${forbidden.code}: ${forbidden.message}` };
  const blind = visionRefusal(checked.card, ctx.tools);
  if (blind !== null) return { stopReason: 'model_lacks_vision', message: `${blind.code}: ${blind.message}` };
  return null;
}
