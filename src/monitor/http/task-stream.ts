/**
 * GET /api/tasks/:id/events — a task's event stream (seed 000, DESIGN §7).
 *
 * - Attached task, not finished, no owner: this stream starts the run and owns it (see
 *   run-owner.ts); it streams the task's event log live until the run ends, then closes.
 *   The client leaving stops the run (user_stop).
 * - A stream already owns it, or another process holds it: 409 RUN_ACTIVE.
 * - Its last run finished (and no cursor is given): the run's stored steps are replayed as
 *   step_finished messages, then run_finished, and the stream closes.
 * - Otherwise (a daemon's task, or a run still being stopped after its owner left) the
 *   stream follows the task's events until the task is finished.
 *
 * Every message is one `task_events` row, its SSE id the row's cursor: a client that comes
 * back with `Last-Event-ID` (or `?after=`) gets every row after it, then the live ones.
 * A client coming back to a finished stream with nothing left to read gets 204, which tells
 * EventSource to stop reconnecting. If the owned run fails in the server, a last
 * `stream_error` message carries `{error: {code, message}}`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  type Actor,
  type Run,
  type RunStore,
  type Step,
  type TaskEvent,
  type TaskManager,
  type TaskStore,
  EngineError,
  isTerminal,
  mayControl,
  eventForReader,
  maySeeRuns,
  mayRead,
  toWireRun,
  toWireStep,
} from '../../engine/index.js';
import { HttpError } from './errors.js';
import { idParam, readableTask } from './request.js';
import type { Handler } from './router.js';
import { ATTACHED_QUEUE, type OwnedRun, type OwnerOutcome, type RunOwner } from './run-owner.js';
import { type SseStream, resumeCursor } from './sse.js';
import { type StreamDetail, toStreamMessage } from './wire.js';

const PAGE = 500;

export interface TaskStreamDeps {
  tm: TaskManager;
  runs: RunStore;
  owner: RunOwner;
  /** Starts an event stream on the response (the server tracks it, to end it at shutdown); 429 past the actor's share. */
  open(req: IncomingMessage, res: ServerResponse, actor: Actor): SseStream;
  /** Refuses (429) an actor that already holds its share of streams, before anything starts. */
  admit(actor: Actor): void;
}

export function taskEventsHandler(deps: TaskStreamDeps): Handler {
  const { tm, runs, owner } = deps;
  return async ({ req, res, params, query, actor }) => {
    const taskId = idParam(params.id, 'task id');
    deps.admit(actor);
    const raw = resumeCursor(req, query);
    const cursor = raw === undefined ? undefined : cursorOf(raw);
    const task = await readableTask(tm, actor, taskId);
    const existing = owner.get(taskId);
    if (existing?.attached === true) throw new HttpError(409, 'RUN_ACTIVE', `task ${taskId}: its run is already owned by another stream`);
    const last = (await runs.runsOf(taskId)).at(-1);

    if (cursor === undefined && existing === undefined && last !== undefined && last.finishedAt !== null && task.state !== 'pending' && maySeeRuns(actor, task)) {
      const stream = deps.open(req, res, actor);
      await replayRun(stream, tm.store, await runs.getRun(last.id));
      stream.end();
      return;
    }

    let owned: OwnedRun | undefined;
    if (existing === undefined && task.queue === ATTACHED_QUEUE && !isTerminal(task.state)) {
      if (task.state === 'claimed' || task.state === 'in_progress') {
        throw new HttpError(409, 'RUN_ACTIVE', `task ${taskId} is ${task.state}, held by ${task.assignee ?? 'another process'}; it can be streamed again once that claim ends`);
      }
      // Starting a run is controlling it: its creator (same id and role) or an operator.
      const may = mayControl(actor, task);
      if (!may.ok) throw new EngineError(may.code, may.message, { task_id: taskId });
      // Seed 000: a card its model cannot run is refused (422) before the stream starts a run.
      const refusal = owner.preflight(task.card);
      if (refusal !== null) throw refusal;
      owned = owner.own(taskId, actor);
    } else if (existing === undefined && cursor !== undefined && isTerminal(task.state)) {
      const [next] = await tm.store.readEvents({ afterId: cursor, taskId, limit: 1 });
      if (next === undefined) {
        res.writeHead(204).end();
        return;
      }
    }

    const stream = deps.open(req, res, actor);
    if (owned !== undefined) stream.onClientGone(() => owned.detach());
    // Owned here or by a stream that left (its run is being stopped): until the owner is done.
    // Anyone else's task: until the task is finished.
    let outcome: OwnerOutcome | undefined;
    const ended = (owned ?? existing)?.done.then((o) => (outcome = o));
    await pump(stream, tm.store, runs, {
      taskId,
      from: cursor ?? 0,
      wake: ended,
      done: ended !== undefined ? () => outcome !== undefined : async () => isTerminal((await tm.store.getTask(taskId, false)).state),
      ...(actor.role === 'agent' ? { access: async () => accessOf(actor, await tm.store.getTask(taskId, false)) } : {}),
    });
    // Not `error`: EventSource reserves that name for its own connection errors.
    if (outcome?.type === 'error') await stream.send({ event: 'stream_error', data: { error: outcome.error } });
    stream.end();
  };
}

function cursorOf(text: string): number {
  if (!/^\d{1,15}$/.test(text)) throw new EngineError('VALIDATION_FAILED', `event cursor: '${text}' is not an event id (a non-negative integer)`);
  return Number(text);
}

interface PumpOptions {
  taskId: number;
  from: number;
  /** Checked before each read: once true, the rows read next are the last ones. */
  done: () => boolean | Promise<boolean>;
  /** Settles when `done` may have become true without a commit. */
  wake?: Promise<unknown>;
  /**
   * Asked before each batch is sent: reading is authority at every moment, not only when the
   * stream opened (an agent that could read a pending task may not follow another's run of it),
   * and so is seeing the runs (an agent that may claim the task gets its events without the
   * steps' arguments and results). Unset: everything.
   */
  access?: () => Promise<Access>;
}

interface Access {
  read: boolean;
  runs: boolean;
}

const accessOf = (actor: Actor, task: Parameters<typeof mayRead>[1]): Access => ({ read: mayRead(actor, task), runs: maySeeRuns(actor, task) });

/** Streams the task's rows after `from`, live, until `done` and everything before it is sent. */
async function pump(stream: SseStream, store: TaskStore, runs: RunStore, o: PumpOptions): Promise<void> {
  const detail = createDetailReader(runs);
  let cursor = o.from;
  let dirty = true;
  let wake: (() => void) | undefined;
  const poke = () => {
    dirty = true;
    wake?.();
  };
  const unwatch = store.watch(poke);
  void o.wake?.then(poke);
  stream.signal.addEventListener('abort', poke);
  try {
    while (!stream.signal.aborted) {
      const finished = await o.done();
      dirty = false;
      const rows = await store.readEvents({ afterId: cursor, taskId: o.taskId, limit: PAGE });
      const access = rows.length > 0 && o.access !== undefined ? await o.access() : { read: true, runs: true };
      if (!access.read) {
        await stream.send({ event: 'stream_error', data: { error: { code: 'FORBIDDEN', message: `task ${o.taskId} is no longer yours to read` } } });
        return;
      }
      for (const row of rows) {
        if (stream.signal.aborted) return;
        await stream.send(access.runs ? toStreamMessage(row, await detail(row)) : toStreamMessage(eventForReader(row, false)));
        cursor = row.id;
      }
      if (rows.length === PAGE) continue;
      if (finished) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
        if (dirty || stream.signal.aborted) resolve();
      });
      wake = undefined;
    }
  } finally {
    unwatch();
    stream.signal.removeEventListener('abort', poke);
  }
}

/** The step or finished run a row reports, read from the store (cached per stream). */
function createDetailReader(runs: RunStore): (row: TaskEvent) => Promise<StreamDetail> {
  const cache = new Map<number, Run & { steps: Step[] }>();
  const load = async (runId: number) => {
    try {
      const run = await runs.getRun(runId);
      cache.set(runId, run);
      return run;
    } catch {
      return undefined; // compacted by retention: the row goes out without detail
    }
  };
  return async (row) => {
    const runId = row.data.run_id;
    if (typeof runId !== 'number') return {};
    if (row.type === 'run.finished') {
      const run = await load(runId);
      return run === undefined ? {} : { run };
    }
    if (row.type !== 'run.step_started' && row.type !== 'run.step_finished') return {};
    const find = (run: (Run & { steps: Step[] }) | undefined) => run?.steps.find((s) => s.seq === row.data.seq);
    let step = find(cache.get(runId));
    const unsettled = step !== undefined && (step.status === 'started' || step.status === 'waiting_approval');
    if (step === undefined || (row.type === 'run.step_finished' && unsettled)) step = find(await load(runId));
    return step === undefined ? {} : { step };
  };
}

/** A finished run: its stored steps as step_finished messages, then run_finished. */
async function replayRun(stream: SseStream, store: TaskStore, run: Run & { steps: Step[] }): Promise<void> {
  const finishedRows = new Map<number, TaskEvent>();
  let finishRow: TaskEvent | undefined;
  for (let after = 0; ; ) {
    const rows = await store.readEvents({ afterId: after, taskId: run.taskId, limit: PAGE });
    for (const row of rows) {
      if (row.data.run_id !== run.id) continue;
      if (row.type === 'run.step_finished' && typeof row.data.seq === 'number') finishedRows.set(row.data.seq, row);
      if (row.type === 'run.finished') finishRow = row;
    }
    if (rows.length < PAGE) break;
    after = rows.at(-1)!.id;
  }
  for (const step of run.steps) {
    const row = finishedRows.get(step.seq);
    if (row !== undefined) await stream.send(toStreamMessage(row, { step }));
    else if (step.status !== 'started' && step.status !== 'waiting_approval') {
      // Its event was compacted away (retention): the step goes out without a cursor.
      await stream.send({ event: 'step_finished', data: { type: 'run.step_finished', task_id: run.taskId, step: toWireStep(step) } });
    }
  }
  if (finishRow !== undefined) await stream.send(toStreamMessage(finishRow, { run }));
  else await stream.send({ event: 'run_finished', data: { type: 'run.finished', task_id: run.taskId, run: toWireRun(run), envelope: run.envelope } });
}
