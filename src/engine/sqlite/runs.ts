/** Runs and steps: fenced loop writes, each with its event, in the task store's connection (their reads: run-reads.ts). */
import { EngineError } from '../errors.js';
import { type BeginStepInput, type Budget, type Fence, type FinishRunInput, type FinishStepInput, type OpenRunResult, type ParkRunInput, type RecordStepInput, type ResumeRunInput, type Run, type Step, type StepWrite, type Usage, usageAfter } from '../runs.js';
import { asAgent, systemActor } from '../actors.js';
import { isFenced } from '../states.js';
import { startedData } from '../abandoned-run.js';
import { RUN_COLUMNS, type RunRow, type StepRow, ZERO_USAGE, runRowOf, toRun, toStep } from '../run-rows.js';
import { toWireBudget } from '../wire.js';
import type { Actor, Task, TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { markWake } from './wake-files.js';
import { type ApplyMove, moveParts, noMovesStaged } from './moves.js';
import { type TaskRow, prepareGetRow, toTask } from './rows.js';
import type { EventWriter } from './rows.js';

export interface RunWrites {
  fence(f: Fence): TaskRow;
  openRun(f: Fence, budget: Budget, now: number, events: TaskEvent[]): OpenRunResult;
  beginStep(f: Fence, input: BeginStepInput, now: number, events: TaskEvent[]): Step;
  finishStep(f: Fence, input: FinishStepInput, now: number, events: TaskEvent[]): Step;
  /** Step writes held back by the loop, in order (fenced once). */
  writeSteps(f: Fence, writes: StepWrite[], now: number, events: TaskEvent[]): Step[];
  setPaused(f: Fence, runId: number, paused: boolean, reason: string, now: number, events: TaskEvent[]): void;
  finishRun(f: Fence, input: FinishRunInput, now: number, events: TaskEvent[]): { run: Run; task: Task };
  releaseRun(f: Fence, runId: number, reason: string, now: number, events: TaskEvent[]): void;
  parkRun(f: Fence, input: ParkRunInput, now: number, events: TaskEvent[]): { run: Run; task: Task };
  resumeRun(input: ResumeRunInput, now: number, events: TaskEvent[]): Task;
  recordRestart(f: Fence, runId: number, reason: string, now: number, events: TaskEvent[]): number;
}

export function prepareRunWrites(db: Db, writer: EventWriter, apply: ApplyMove): RunWrites {
  const parts = moveParts(apply);
  const stage = parts?.stage ?? apply;
  const commit = parts?.commit ?? ((row: TaskRow) => row);
  // Rows the hot writes read come in raw mode (rows.ts rowOf, runRowOf below): better-sqlite3
  // building an object key by key costs more than the statement.
  const taskRow = prepareGetRow(db);
  const activeRun = db.prepare<[number], RunRow>('SELECT * FROM runs WHERE task_id = ? AND finished_at IS NULL');
  const runByIdRaw = db.prepare<[number], unknown[]>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`).raw(true);
  const runById = (id: number): RunRow | undefined => {
    const a = runByIdRaw.get(id);
    return a === undefined ? undefined : runRowOf(a);
  };
  // The hot inserts and the run's ending build their row in JS instead of reading it back:
  // RETURNING costs SQLite an ephemeral table and a second copy of the row (2.5 µs → 6–15 µs
  // for a step insert, measured), and every value of these rows is known here.
  const insertRun = db.prepare<[number, string, string, number]>(
    `INSERT INTO runs (task_id, phase, budget, usage, started_at) VALUES (?, 'running', ?, ?, ?)`,
  );
  const setPhase = db.prepare('UPDATE runs SET phase = ? WHERE id = ?');
  const stepsOf = db.prepare<[number], StepRow>('SELECT * FROM steps WHERE run_id = ? ORDER BY seq');
  const nextSeq = db.prepare<[number], { seq: number }>('SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM steps WHERE run_id = ?');
  const insertStep = db.prepare<[number, number, string, string | null, string | null, string | null, number]>(
    `INSERT INTO steps (run_id, seq, kind, status, tool, args, idempotency_key, started_at) VALUES (?, ?, ?, 'started', ?, ?, ?, ?)`,
  );
  const updateStep = db.prepare<Record<string, unknown>, StepRow>(
    `UPDATE steps SET status = @status, result = @result, error = @error, duration_ms = @duration, tokens = @tokens,
       finished_at = @now WHERE id = @id AND run_id IN (SELECT id FROM runs WHERE task_id = @task) RETURNING *`,
  );
  const insertDone = db.prepare<unknown[]>(
    `INSERT INTO steps (run_id, seq, kind, status, tool, args, result, error, duration_ms, tokens, idempotency_key, started_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const updateUsage = db.prepare('UPDATE runs SET usage = ?, checkpoint_version = MAX(checkpoint_version, ?) WHERE id = ?');
  const endRun = db.prepare<[string, string, string, string, number, number, number]>(
    `UPDATE runs SET phase = ?, stop_reason = ?, envelope = ?, usage = ?, finished_at = ?,
       checkpoint_version = MAX(checkpoint_version, ?) WHERE id = ? AND finished_at IS NULL`,
  );
  const clearControl = db.prepare('DELETE FROM controls WHERE task_id = ?');
  const parkOpen = db.prepare<Record<string, unknown>, RunRow>(
    `UPDATE runs SET phase = 'waiting_input', stop_reason = @stop_reason, envelope = @envelope, usage = @usage
     WHERE id = @id AND finished_at IS NULL RETURNING *`,
  );
  const declare = db.prepare("UPDATE steps SET status = ?, result = ?, error = NULL WHERE id = ? AND status = 'unknown'");
  const setRestarts = db.prepare('UPDATE runs SET restarts = ? WHERE id = ?');
  const giveBackAttempt = db.prepare('UPDATE tasks SET attempts = MAX(attempts - 1, 0) WHERE id = ?');
  const saveScreen = db.prepare(
    `INSERT INTO run_screens (run_id, seq, png, taken_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, png = excluded.png, taken_at = excluded.taken_at`,
  );

  const claimOf = db.prepare<[number], { state: TaskRow['state']; claim_token: string | null }>('SELECT state, claim_token FROM tasks WHERE id = ?');
  /** The fence of a step write: only the claim is read, not the row (the card can be large). */
  function fenceLight(f: Fence): void {
    const row = claimOf.get(f.taskId);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${f.taskId} does not exist`, { task_id: f.taskId });
    if (row.claim_token !== f.claimToken || !isFenced(row.state)) {
      throw new EngineError('STALE_CLAIM', `task ${f.taskId}: the claim of ${f.agent} is no longer current (task is ${row.state})`, { task_id: f.taskId });
    }
  }

  function fence(f: Fence): TaskRow {
    const row = taskRow(f.taskId);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${f.taskId} does not exist`, { task_id: f.taskId });
    if (row.claim_token !== f.claimToken || !isFenced(row.state)) {
      throw new EngineError('STALE_CLAIM', `task ${f.taskId}: the claim of ${f.agent} is no longer current (task is ${row.state})`, {
        task_id: f.taskId,
      });
    }
    return row;
  }

  function runOf(f: Fence, runId: number): RunRow {
    const run = runById(runId);
    if (run === undefined || run.task_id !== f.taskId || run.finished_at !== null) {
      throw new EngineError('INVALID_TRANSITION', `run ${runId} is not an open run of task ${f.taskId}`, { run_id: runId });
    }
    return run;
  }

  /** Finishes a step begun earlier: its outcome, the run's usage, its screen, one event. */
  function finished(f: Fence, input: FinishStepInput, now: number, events: TaskEvent[], usage = true): Step {
    const row = updateStep.get({
      id: input.stepId,
      status: input.status,
      result: input.result === undefined ? null : JSON.stringify(input.result),
      error: input.error ?? null,
      duration: Math.round(input.durationMs),
      tokens: input.tokens ?? 0,
      now,
      // A step of another task's run is not this fence's to write.
      task: f.taskId,
    });
    if (row === undefined) throw new EngineError('VALIDATION_FAILED', `step ${input.stepId} is not a step of task ${f.taskId}'s runs`);
    if (usage) updateUsage.run(JSON.stringify(input.usage), row.seq, row.run_id);
    if (input.screen !== undefined) saveScreen.run(row.run_id, row.seq, input.screen, now);
    events.push(stepFinished(f, row, input.status, now, input.error, input.eventData));
    return toStep(row);
  }

  /**
   * Begins a step: its row, `started`, and one event (the caller has fenced and checked the
   * run). `intent`: a call's step committed before the call (beginStep), not a read begun
   * late by a flush (abandoned-run.ts).
   */
  function begun(f: Fence, input: BeginStepInput, now: number, events: TaskEvent[], intent: boolean, seq = nextSeq.get(input.runId)!.seq): Step {
    const row: StepRow = {
      id: 0,
      run_id: input.runId,
      seq,
      kind: input.kind,
      status: 'started',
      tool: input.tool ?? null,
      args: input.args === undefined ? null : JSON.stringify(input.args),
      result: null,
      error: null,
      duration_ms: null,
      tokens: 0,
      idempotency_key: input.idempotencyKey ?? null,
      started_at: input.startedAt ?? now,
      finished_at: null,
    };
    row.id = Number(insertStep.run(row.run_id, seq, row.kind, row.tool, row.args, row.idempotency_key, row.started_at).lastInsertRowid);
    events.push(writer.append(f.taskId, 'run.step_started', asAgent(f.agent), startedData(input, seq, intent), now));
    return toStep(row);
  }

  /**
   * Records a step that completed before it was written (a decision, a refused call): one row,
   * one event. Only through `written`, which has checked the run open, counted its seq and
   * writes the run's usage once for all its writes.
   */
  function recorded(f: Fence, input: RecordStepInput, now: number, events: TaskEvent[], seq: number): Step {
    const row: StepRow = {
      id: 0,
      run_id: input.runId,
      seq,
      kind: input.kind,
      status: input.status,
      tool: input.tool ?? null,
      args: input.args === undefined ? null : JSON.stringify(input.args),
      result: input.result === undefined ? null : JSON.stringify(input.result),
      error: input.error ?? null,
      duration_ms: Math.round(input.durationMs),
      tokens: input.tokens ?? 0,
      idempotency_key: input.idempotencyKey ?? null,
      started_at: input.startedAt,
      finished_at: now,
    };
    row.id = Number(
      insertDone.run(row.run_id, seq, row.kind, row.status, row.tool, row.args, row.result, row.error, row.duration_ms, row.tokens, row.idempotency_key, row.started_at, now)
        .lastInsertRowid,
    );
    if (input.screen !== undefined) saveScreen.run(row.run_id, row.seq, input.screen, now);
    events.push(stepFinished(f, row, input.status, now, input.error, input.eventData));
    return toStep(row);
  }

  function stepFinished(f: Fence, row: StepRow, status: string, now: number, error: string | undefined, extra: Record<string, unknown> | undefined): TaskEvent {
    return writer.append(f.taskId, 'run.step_finished', asAgent(f.agent), {
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

  /**
   * Step writes the loop held back, in their order (the caller has fenced). Each run is
   * checked open once (`opened` holds the rows of the runs checked, for the caller's next write), its next
   * seq read once and counted on from there, and its usage written once, after them all: the
   * last write's usage, with the highest seq as the checkpoint — or not at all with
   * `ending`, whose caller writes the run's final usage and that checkpoint in the same
   * statement that ends it (`checkpoint` holds it then).
   */
  function written(f: Fence, writes: StepWrite[], now: number, events: TaskEvent[], opened = new Map<number, RunRow>(), ending?: { runId: number; checkpoint: number }): Step[] {
    const seqs = new Map<number, number>();
    const open = (runId: number): void => {
      if (!opened.has(runId)) opened.set(runId, runOf(f, runId));
    };
    const seqOf = (runId: number): number => {
      const seq = seqs.get(runId) ?? nextSeq.get(runId)!.seq;
      seqs.set(runId, seq + 1);
      return seq;
    };
    const steps = writes.map((w) => {
      if ('finish' in w) return finished(f, w.finish, now, events, false);
      if ('begin' in w) {
        open(w.begin.runId);
        return begun(f, w.begin, now, events, false, seqOf(w.begin.runId));
      }
      open(w.record.runId);
      return recorded(f, w.record, now, events, seqOf(w.record.runId));
    });
    const usage = usageAfter(writes);
    if (usage !== undefined && steps.length > 0) {
      const top = steps.reduce((a, b) => (b.seq > a.seq ? b : a));
      if (ending?.runId === top.runId) ending.checkpoint = top.seq;
      else updateUsage.run(JSON.stringify(usage), top.seq, top.runId);
    }
    return steps;
  }

  return {
    fence,
    openRun(f, budget, now, events) {
      // Only the claim is checked: the row (its card can be large) is not needed here.
      fenceLight(f);
      const existing = activeRun.get(f.taskId);
      if (existing !== undefined) {
        setPhase.run('running', existing.id);
        events.push(writer.append(f.taskId, 'run.resumed', asAgent(f.agent), { run_id: existing.id, reason: 'claimed again' }, now));
        return { run: { ...toRun(existing), phase: 'running' }, steps: stepsOf.all(existing.id).map(toStep), resumed: true, resumedFrom: existing.phase };
      }
      const row: RunRow = {
        id: 0,
        task_id: f.taskId,
        phase: 'running',
        stop_reason: null,
        budget: JSON.stringify(budget),
        usage: JSON.stringify(ZERO_USAGE),
        checkpoint_version: 0,
        restarts: 0,
        started_at: now,
        finished_at: null,
        envelope: null,
      };
      row.id = Number(insertRun.run(f.taskId, row.budget, row.usage, now).lastInsertRowid);
      events.push(writer.append(f.taskId, 'run.started', asAgent(f.agent), { run_id: row.id, budget: toWireBudget(budget) }, now));
      return { run: toRun(row), steps: [], resumed: false };
    },
    writeSteps(f, writes, now, events) {
      fenceLight(f);
      return written(f, writes, now, events);
    },
    beginStep(f, input, now, events) {
      fenceLight(f);
      const opened = new Map<number, RunRow>();
      if (input.before !== undefined) written(f, input.before, now, events, opened);
      if (!opened.has(input.runId)) runOf(f, input.runId);
      return begun(f, input, now, events, true);
    },
    finishStep(f, input, now, events) {
      fenceLight(f);
      if (input.before !== undefined) written(f, input.before, now, events);
      return finished(f, input, now, events);
    },
    setPaused(f, runId, paused, reason, now, events) {
      fenceLight(f);
      runOf(f, runId);
      setPhase.run(paused ? 'paused' : 'running', runId);
      events.push(writer.append(f.taskId, paused ? 'run.paused' : 'run.resumed', asAgent(f.agent), { run_id: runId, reason }, now));
    },
    finishRun(f, input, now, events) {
      let task = fence(f);
      const opened = new Map<number, RunRow>();
      // The held-back steps' usage and checkpoint go into the run's ending (endRun), not a write of their own.
      const ending = { runId: input.runId, checkpoint: 0 };
      if (input.before !== undefined) written(f, input.before, now, events, opened, ending);
      // The run as checked open in this transaction: with `ending`, the held-back steps wrote
      // nothing to it, so its ended row is this one with endRun's columns.
      const open = opened.get(input.runId) ?? runOf(f, input.runId);
      const run: RunRow = {
        ...open,
        phase: input.phase,
        stop_reason: input.stopReason,
        envelope: JSON.stringify(input.envelope),
        usage: JSON.stringify(input.usage),
        finished_at: now,
        checkpoint_version: Math.max(open.checkpoint_version, ending.checkpoint),
      };
      endRun.run(run.phase, input.stopReason, run.envelope!, run.usage, now, ending.checkpoint, input.runId);
      events.push(writer.append(f.taskId, 'run.finished', asAgent(f.agent), { run_id: run.id, phase: input.phase, stop_reason: input.stopReason }, now));
      // The moves are checked one by one and the row written once, in its final state (as a
      // transition's `then`, moves.ts MoveParts): review → completed is one UPDATE, not two.
      const staged = noMovesStaged();
      input.moves.forEach((move, i) => {
        const actor: Actor = move.by === 'assignee' ? asAgent(f.agent) : systemActor(move.systemActor ?? 'loop');
        const last = i === input.moves.length - 1;
        task = stage(task, { to: move.to, actor, reason: move.reason, result: last ? input.result : undefined }, now, events, staged);
      });
      if (input.moves.length > 0) task = commit(task, now, events, staged);
      if (clearControl.run(f.taskId).changes > 0) markWake(db, 'controls');
      // Built on first read: the loop does not read them, and building them parses back every
      // JSON column just written (the card, the budget, the usage, the envelope).
      const ended = task;
      let runOut: Run | undefined;
      let taskOut: Task | undefined;
      return {
        get run() {
          return (runOut ??= toRun(run));
        },
        get task() {
          return (taskOut ??= toTask(ended));
        },
      };
    },
    recordRestart(f, runId, reason, now, events) {
      fenceLight(f);
      const run = runOf(f, runId);
      const restarts = run.restarts + 1;
      setRestarts.run(restarts, runId);
      events.push(writer.append(f.taskId, 'run.restarted', asAgent(f.agent), { run_id: runId, restart: restarts, reason }, now));
      return restarts;
    },
    releaseRun(f, runId, reason, now, events) {
      const task = fence(f);
      runOf(f, runId);
      setPhase.run('paused', runId);
      events.push(writer.append(f.taskId, 'run.paused', asAgent(f.agent), { run_id: runId, reason }, now));
      apply(task, { to: 'pending', actor: systemActor('daemon'), reason }, now, events);
      // A graceful release is not a failed attempt either (unlike a lease that ran out).
      giveBackAttempt.run(f.taskId);
    },
    parkRun(f, input, now, events) {
      const task = fence(f);
      runOf(f, input.runId);
      const run = parkOpen.get({ id: input.runId, stop_reason: input.stopReason, envelope: JSON.stringify(input.envelope), usage: JSON.stringify(input.usage) })!;
      events.push(writer.append(f.taskId, 'run.paused', asAgent(f.agent), { run_id: run.id, reason: input.stopReason, waiting: 'input' }, now));
      const moved = apply(task, { to: 'waiting', actor: asAgent(f.agent), reason: input.stopReason, result: input.envelope }, now, events);
      return { run: toRun(run), task: toTask(moved) };
    },
    resumeRun(input, now, events) {
      const task = taskRow(input.taskId);
      if (task === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
      const run = activeRun.get(input.taskId);
      if (task.state !== 'waiting' || run === undefined || run.phase !== 'waiting_input') {
        throw new EngineError('INVALID_TRANSITION', `task ${input.taskId} has no run waiting for input (task ${task.state}${run === undefined ? ', no open run' : `, run ${run.id} ${run.phase}`})`, { task_id: input.taskId });
      }
      const unknown = stepsOf.all(run.id).filter((s) => s.status === 'unknown');
      if (unknown.length > 0 && input.sideEffect === undefined) {
        const which = unknown.map((s) => `step ${s.seq} (${s.tool})`).join(', ');
        throw new EngineError('VALIDATION_FAILED', `task ${input.taskId}: ${which} may or may not have taken effect; say which: resume with --side-effect happened|not-happened`, { task_id: input.taskId });
      }
      // The state machine decides who may resume (waiting -> pending: an operator or the system).
      const moved = apply(task, { to: 'pending', actor: input.actor, reason: input.reason ?? `resumed (${run.stop_reason})` }, now, events);
      for (const step of unknown) {
        declare.run(input.sideEffect === 'happened' ? 'ok' : 'not_happened', JSON.stringify({ declared: input.sideEffect, by: input.actor.id }), step.id);
      }
      // The operator's input is a fresh start for the restart policy; the budgets keep counting.
      if (run.stop_reason === 'restart_limit') setRestarts.run(0, run.id);
      events.push(writer.append(input.taskId, 'run.resume_requested', input.actor, {
        run_id: run.id,
        waited_for: run.stop_reason,
        ...(input.sideEffect === undefined ? {} : { side_effect: input.sideEffect, steps: unknown.map((s) => s.seq) }),
        ...(input.reason === undefined ? {} : { reason: input.reason }),
      }, now));
      giveBackAttempt.run(input.taskId);
      moved.attempts = Math.max(moved.attempts - 1, 0);
      return toTask(moved);
    },
  };
}
