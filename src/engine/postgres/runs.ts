/**
 * Runs and steps on PostgreSQL: fenced loop writes, each with its event, inside the caller's
 * transaction (task-store.ts `write`).
 *
 * Concurrency, where SQLite had one writer at a time: every write of a run, its steps and
 * its usage first locks its task's row (the fence, `FOR UPDATE`), and so does every other
 * writer of a run (moves.ts closes a run only on a locked task, resumeRun locks it itself).
 * That lock is what serializes a run's writers: two processes writing steps of one run
 * take turns, and the second one's statements (READ COMMITTED: a snapshot per statement)
 * see what the first committed, so a step's `seq` taken as MAX(seq) + 1 is never taken
 * twice, a phase is never set over one it did not see, and usage is never written out of
 * order. The run rows themselves are therefore read without a lock of their own.
 */
import { asAgent, systemActor } from '../actors.js';
import { EngineError } from '../errors.js';
import type { ClaimedRun } from '../run-store.js';
import { startedData } from '../abandoned-run.js';
import { type RunRow, type StepRow, ZERO_USAGE, toRun, toStep } from '../run-rows.js';
import { type BeginStepInput, type Budget, type Fence, type FinishRunInput, type FinishStepInput, type OpenRunResult, type ParkRunInput, type RecordStepInput, type ResumeRunInput, type Run, type ScreenInfo, type Step, type StepWrite, type Usage, usageAfter } from '../runs.js';
import { stageMove, toTask } from '../task-rows.js';
import type { Actor, ClaimInput, ClaimedTask, Task, TaskEvent } from '../types.js';
import { toWireBudget } from '../wire.js';
import { claimTask } from './claim.js';
import type { Query } from './connection.js';
import { appendEvent, applyMove, commitMoves, lockTask } from './moves.js';
import { fenceClaim, fenceTask } from './fence.js';

type RunR = RunRow & Record<string, unknown>;
type StepR = StepRow & Record<string, unknown>;

/** The run's next seq, in the INSERT itself: safe only under the task's row lock (see above). */
const NEXT_SEQ = '(SELECT COALESCE(MAX(seq), 0) + 1 FROM steps WHERE run_id = $1)';

// The fences (fence.ts): a write that moves the task reads its whole row, a step write only its claim.
const fence = fenceTask;
const fenceLight = fenceClaim;

async function runOf(q: Query, f: Fence, runId: number): Promise<RunRow> {
  const [run] = await q<RunR>('SELECT * FROM runs WHERE id = $1', [runId]);
  if (run === undefined || run.task_id !== f.taskId || run.finished_at !== null) {
    throw new EngineError('INVALID_TRANSITION', `run ${runId} is not an open run of task ${f.taskId}`, { run_id: runId });
  }
  return run;
}

const activeRun = async (q: Query, taskId: number): Promise<RunRow | undefined> =>
  (await q<RunR>('SELECT * FROM runs WHERE task_id = $1 AND finished_at IS NULL', [taskId]))[0];
const stepsOf = (q: Query, runId: number): Promise<StepRow[]> => q<StepR>(`SELECT * FROM steps WHERE run_id = $1 ORDER BY seq`, [runId]);
const setPhase = (q: Query, runId: number, phase: Run['phase']) => q('UPDATE runs SET phase = $1 WHERE id = $2', [phase, runId]);
const updateUsage = (q: Query, usage: Usage, seq: number, runId: number) =>
  q('UPDATE runs SET usage = $1, checkpoint_version = GREATEST(checkpoint_version, $2) WHERE id = $3', [JSON.stringify(usage), seq, runId]);
const giveBackAttempt = (q: Query, taskId: number) => q('UPDATE tasks SET attempts = GREATEST(attempts - 1, 0) WHERE id = $1', [taskId]);
const jsonOrNull = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value));

async function stepFinished(q: Query, f: Fence, row: StepRow, status: string, now: number, error: string | undefined, extra: Record<string, unknown> | undefined): Promise<TaskEvent> {
  return appendEvent(q, f.taskId, 'run.step_finished', asAgent(f.agent), {
    run_id: row.run_id,
    seq: row.seq,
    kind: row.kind,
    tool: row.tool,
    status,
    duration_ms: row.duration_ms,
    ...(error === undefined ? {} : { error }),
    ...extra,
  }, now);
}

/** One statement: the run keeps only its latest screen. */
async function saveScreen(q: Query, row: StepRow, screen: Uint8Array, now: number): Promise<void> {
  const png = Buffer.from(screen.buffer, screen.byteOffset, screen.byteLength);
  await q(
    `INSERT INTO run_screens (run_id, seq, png, taken_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, png = excluded.png, taken_at = excluded.taken_at`,
    [row.run_id, row.seq, png, now],
  );
}

/**
 * Begins a step: its row, `started`, and one event (the caller has fenced and checked the
 * run). `intent`: a call's step committed before the call (beginStep), not a read begun late
 * by a flush (abandoned-run.ts).
 */
async function begun(q: Query, f: Fence, input: BeginStepInput, now: number, events: TaskEvent[], intent: boolean): Promise<Step> {
  const [row] = await q<StepR>(
    `INSERT INTO steps (run_id, seq, kind, status, tool, args, idempotency_key, started_at)
     VALUES ($1, ${NEXT_SEQ}, $2, 'started', $3, $4, $5, $6) RETURNING *`,
    [input.runId, input.kind, input.tool ?? null, jsonOrNull(input.args), input.idempotencyKey ?? null, input.startedAt ?? now],
  );
  events.push(await appendEvent(q, f.taskId, 'run.step_started', asAgent(f.agent), startedData(input, row!.seq, intent), now));
  return toStep(row!);
}

/** Finishes a step begun earlier: its outcome, the run's usage, its screen, one event. */
async function finished(q: Query, f: Fence, input: FinishStepInput, now: number, events: TaskEvent[], usage = true): Promise<Step> {
  const [row] = await q<StepR>(
    `UPDATE steps SET status = $1, result = $2, error = $3, duration_ms = $4, tokens = $5, finished_at = $6
     WHERE id = $7 AND run_id IN (SELECT id FROM runs WHERE task_id = $8) RETURNING *`,
    [input.status, jsonOrNull(input.result), input.error ?? null, Math.round(input.durationMs), input.tokens ?? 0, now, input.stepId, f.taskId],
  );
  if (row === undefined) throw new EngineError('VALIDATION_FAILED', `step ${input.stepId} is not a step of task ${f.taskId}'s runs`);
  if (usage) await updateUsage(q, input.usage, row.seq, row.run_id);
  if (input.screen !== undefined) await saveScreen(q, row, input.screen, now);
  events.push(await stepFinished(q, f, row, input.status, now, input.error, input.eventData));
  return toStep(row);
}

/** Records a step that completed before it was written (a decision, a refused call): one row, one event. */
async function recorded(q: Query, f: Fence, input: RecordStepInput, now: number, events: TaskEvent[], usage = true, checked = false): Promise<Step> {
  if (!checked) await runOf(q, f, input.runId);
  const [row] = await q<StepR>(
    `INSERT INTO steps (run_id, seq, kind, status, tool, args, result, error, duration_ms, tokens, started_at, finished_at, idempotency_key)
     VALUES ($1, ${NEXT_SEQ}, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING *`,
    [
      input.runId,
      input.kind,
      input.status,
      input.tool ?? null,
      jsonOrNull(input.args),
      jsonOrNull(input.result),
      input.error ?? null,
      Math.round(input.durationMs),
      input.tokens ?? 0,
      input.startedAt,
      now,
      input.idempotencyKey ?? null,
    ],
  );
  if (usage) await updateUsage(q, input.usage, row!.seq, row!.run_id);
  if (input.screen !== undefined) await saveScreen(q, row!, input.screen, now);
  events.push(await stepFinished(q, f, row!, input.status, now, input.error, input.eventData));
  return toStep(row!);
}

/**
 * Step writes the loop held back, in their order (the caller has fenced). The run is
 * checked open once, and its usage written once, after them all: the last write's usage,
 * with the highest seq as the checkpoint (each step write did both before).
 */
async function written(q: Query, f: Fence, writes: StepWrite[], now: number, events: TaskEvent[]): Promise<Step[]> {
  const opened = new Set<number>();
  const steps: Step[] = [];
  const open = (runId: number): boolean => {
    const checked = opened.has(runId);
    opened.add(runId);
    return checked;
  };
  for (const w of writes) {
    if ('finish' in w) {
      steps.push(await finished(q, f, w.finish, now, events, false));
    } else if ('begin' in w) {
      if (!open(w.begin.runId)) await runOf(q, f, w.begin.runId);
      steps.push(await begun(q, f, w.begin, now, events, false));
    } else {
      steps.push(await recorded(q, f, w.record, now, events, false, open(w.record.runId)));
    }
  }
  const usage = usageAfter(writes);
  if (usage !== undefined && steps.length > 0) {
    const top = steps.reduce((a, b) => (b.seq > a.seq ? b : a));
    await updateUsage(q, usage, top.seq, top.runId);
  }
  return steps;
}

export const pgRuns = {
  fence,

  async openRun(q: Query, f: Fence, budget: Budget, now: number, events: TaskEvent[]): Promise<OpenRunResult> {
    await fence(q, f);
    // Under the task's lock no other transaction opens or ends a run of it (runs_active also forbids two).
    const existing = await activeRun(q, f.taskId);
    if (existing !== undefined) {
      await setPhase(q, existing.id, 'running');
      events.push(await appendEvent(q, f.taskId, 'run.resumed', asAgent(f.agent), { run_id: existing.id, reason: 'claimed again' }, now));
      return { run: { ...toRun(existing), phase: 'running' }, steps: (await stepsOf(q, existing.id)).map(toStep), resumed: true, resumedFrom: existing.phase };
    }
    const [row] = await q<RunR>(`INSERT INTO runs (task_id, phase, budget, usage, started_at) VALUES ($1, 'running', $2, $3, $4) RETURNING *`, [
      f.taskId,
      JSON.stringify(budget),
      JSON.stringify(ZERO_USAGE),
      now,
    ]);
    events.push(await appendEvent(q, f.taskId, 'run.started', asAgent(f.agent), { run_id: row!.id, budget: toWireBudget(budget) }, now));
    return { run: toRun(row!), steps: [], resumed: false };
  },

  async writeSteps(q: Query, f: Fence, writes: StepWrite[], now: number, events: TaskEvent[]): Promise<Step[]> {
    await fenceLight(q, f);
    return written(q, f, writes, now, events);
  },

  async beginStep(q: Query, f: Fence, input: BeginStepInput, now: number, events: TaskEvent[]): Promise<Step> {
    await fenceLight(q, f);
    if (input.before !== undefined) await written(q, f, input.before, now, events);
    await runOf(q, f, input.runId);
    return begun(q, f, input, now, events, true);
  },

  async finishStep(q: Query, f: Fence, input: FinishStepInput, now: number, events: TaskEvent[]): Promise<Step> {
    await fenceLight(q, f);
    if (input.before !== undefined) await written(q, f, input.before, now, events);
    return finished(q, f, input, now, events);
  },

  async setPaused(q: Query, f: Fence, runId: number, paused: boolean, reason: string, now: number, events: TaskEvent[]): Promise<void> {
    await fenceLight(q, f);
    await runOf(q, f, runId);
    await setPhase(q, runId, paused ? 'paused' : 'running');
    events.push(await appendEvent(q, f.taskId, paused ? 'run.paused' : 'run.resumed', asAgent(f.agent), { run_id: runId, reason }, now));
  },

  async finishRun(q: Query, f: Fence, input: FinishRunInput, now: number, events: TaskEvent[]): Promise<{ run: Run; task: Task }> {
    let task = await fence(q, f);
    if (input.before !== undefined) await written(q, f, input.before, now, events);
    await runOf(q, f, input.runId);
    // Ended before the moves: a terminal move then finds no open run to close as abandoned.
    const [run] = await q<RunR>(
      `UPDATE runs SET phase = $1, stop_reason = $2, envelope = $3, usage = $4, finished_at = $5
       WHERE id = $6 AND finished_at IS NULL RETURNING *`,
      [input.phase, input.stopReason, JSON.stringify(input.envelope), JSON.stringify(input.usage), now, input.runId],
    );
    events.push(await appendEvent(q, f.taskId, 'run.finished', asAgent(f.agent), { run_id: run!.id, phase: input.phase, stop_reason: input.stopReason }, now));
    // The moves are checked one by one and the row written once, in its final state (as a
    // transition's `then`): review → completed is one statement, not two.
    const staged: TaskEvent[] = [];
    for (const [i, move] of input.moves.entries()) {
      const actor: Actor = move.by === 'assignee' ? asAgent(f.agent) : systemActor(move.systemActor ?? 'loop');
      const last = i === input.moves.length - 1;
      const { next, event } = stageMove(task, { to: move.to, actor, reason: move.reason, result: last ? input.result : undefined }, now);
      staged.push(event);
      events.push(event);
      task = next;
    }
    if (staged.length > 0) task = await commitMoves(q, task, staged, now, events);
    await q('DELETE FROM controls WHERE task_id = $1', [f.taskId]);
    return { run: toRun(run!), task: toTask(task) };
  },

  async recordRestart(q: Query, f: Fence, runId: number, reason: string, now: number, events: TaskEvent[]): Promise<number> {
    await fenceLight(q, f);
    await runOf(q, f, runId);
    const [row] = await q<{ restarts: number }>('UPDATE runs SET restarts = restarts + 1 WHERE id = $1 RETURNING restarts', [runId]);
    const restarts = row!.restarts;
    events.push(await appendEvent(q, f.taskId, 'run.restarted', asAgent(f.agent), { run_id: runId, restart: restarts, reason }, now));
    return restarts;
  },

  async releaseRun(q: Query, f: Fence, runId: number, reason: string, now: number, events: TaskEvent[]): Promise<void> {
    const task = await fence(q, f);
    await runOf(q, f, runId);
    await setPhase(q, runId, 'paused');
    events.push(await appendEvent(q, f.taskId, 'run.paused', asAgent(f.agent), { run_id: runId, reason }, now));
    await applyMove(q, task, { to: 'pending', actor: systemActor('daemon'), reason }, now, events);
    // A graceful release is not a failed attempt either (unlike a lease that ran out).
    await giveBackAttempt(q, f.taskId);
  },

  async parkRun(q: Query, f: Fence, input: ParkRunInput, now: number, events: TaskEvent[]): Promise<{ run: Run; task: Task }> {
    const task = await fence(q, f);
    await runOf(q, f, input.runId);
    const [run] = await q<RunR>(
      `UPDATE runs SET phase = 'waiting_input', stop_reason = $1, envelope = $2, usage = $3 WHERE id = $4 AND finished_at IS NULL RETURNING *`,
      [input.stopReason, JSON.stringify(input.envelope), JSON.stringify(input.usage), input.runId],
    );
    events.push(await appendEvent(q, f.taskId, 'run.paused', asAgent(f.agent), { run_id: run!.id, reason: input.stopReason, waiting: 'input' }, now));
    const moved = await applyMove(q, task, { to: 'waiting', actor: asAgent(f.agent), reason: input.stopReason, result: input.envelope }, now, events);
    return { run: toRun(run!), task: toTask(moved) };
  },

  async resumeRun(q: Query, input: ResumeRunInput, now: number, events: TaskEvent[]): Promise<Task> {
    // No claim to fence, but the task's row is locked all the same, before the run is read:
    // two operators resuming at once take turns, and the second finds the task pending.
    const task = await lockTask(q, input.taskId);
    if (task === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
    const run = await activeRun(q, input.taskId);
    if (task.state !== 'waiting' || run === undefined || run.phase !== 'waiting_input') {
      throw new EngineError('INVALID_TRANSITION', `task ${input.taskId} has no run waiting for input (task ${task.state}${run === undefined ? ', no open run' : `, run ${run.id} ${run.phase}`})`, { task_id: input.taskId });
    }
    const unknown = (await stepsOf(q, run.id)).filter((s) => s.status === 'unknown');
    if (unknown.length > 0 && input.sideEffect === undefined) {
      const which = unknown.map((s) => `step ${s.seq} (${s.tool})`).join(', ');
      throw new EngineError('VALIDATION_FAILED', `task ${input.taskId}: ${which} may or may not have taken effect; say which: resume with --side-effect happened|not-happened`, { task_id: input.taskId });
    }
    // The state machine decides who may resume (waiting -> pending: an operator or the system).
    const moved = await applyMove(q, task, { to: 'pending', actor: input.actor, reason: input.reason ?? `resumed (${run.stop_reason})` }, now, events);
    for (const step of unknown) {
      await q("UPDATE steps SET status = $1, result = $2, error = NULL WHERE id = $3 AND status = 'unknown'", [
        input.sideEffect === 'happened' ? 'ok' : 'not_happened',
        JSON.stringify({ declared: input.sideEffect, by: input.actor.id }),
        step.id,
      ]);
    }
    // The operator's input is a fresh start for the restart policy; the budgets keep counting.
    if (run.stop_reason === 'restart_limit') await q('UPDATE runs SET restarts = 0 WHERE id = $1', [run.id]);
    events.push(await appendEvent(q, input.taskId, 'run.resume_requested', input.actor, {
      run_id: run.id,
      waited_for: run.stop_reason,
      ...(input.sideEffect === undefined ? {} : { side_effect: input.sideEffect, steps: unknown.map((s) => s.seq) }),
      ...(input.reason === undefined ? {} : { reason: input.reason }),
    }, now));
    await giveBackAttempt(q, input.taskId);
    moved.attempts = Math.max(moved.attempts - 1, 0);
    return toTask(moved);
  },

  async getRun(q: Query, runId: number): Promise<Run & { steps: Step[]; screen: ScreenInfo | null }> {
    // The run with its screen in one statement; its steps in another, at most newer than the run.
    const [[row], steps] = await Promise.all([
      q<RunR & { screen_seq: number | null; screen_taken_at: number | null; screen_bytes: number | null }>(
        `SELECT r.*, s.seq AS screen_seq, s.taken_at AS screen_taken_at, octet_length(s.png) AS screen_bytes
         FROM runs r LEFT JOIN run_screens s ON s.run_id = r.id WHERE r.id = $1`,
        [runId],
      ),
      stepsOf(q, runId),
    ]);
    if (row === undefined) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`, { run_id: runId });
    const screen = row.screen_seq === null ? null : { seq: row.screen_seq, takenAt: row.screen_taken_at!, bytes: row.screen_bytes! };
    return { ...toRun(row), steps: steps.map(toStep), screen };
  },

  async runsOf(q: Query, taskId: number): Promise<Run[]> {
    return (await q<RunR>('SELECT * FROM runs WHERE task_id = $1 ORDER BY id', [taskId])).map(toRun);
  },

  async getScreen(q: Query, runId: number): Promise<(ScreenInfo & { png: Buffer }) | null> {
    const [row] = await q<{ seq: number; taken_at: number; png: Buffer }>('SELECT seq, taken_at, png FROM run_screens WHERE run_id = $1', [runId]);
    return row === undefined ? null : { seq: row.seq, takenAt: row.taken_at, bytes: row.png.length, png: row.png };
  },
};

/**
 * A claim and its run opened (or resumed) in the caller's transaction: null when nothing was
 * claimable. `input` is parsed and checked by the caller (run-store's claimRun, as on SQLite).
 */
export async function claimRun(
  q: Query,
  input: ClaimInput,
  budgetOf: (task: ClaimedTask, now: number) => Budget,
  now: number,
  events: TaskEvent[],
): Promise<ClaimedRun | null> {
  const task = await claimTask(q, input, now, events);
  if (task === null) return null;
  const f = { taskId: task.id, claimToken: task.claimToken, agent: input.agent };
  return { task, opened: await pgRuns.openRun(q, f, budgetOf(task, now), now, events) };
}
