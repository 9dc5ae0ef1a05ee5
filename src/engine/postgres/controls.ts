/**
 * Stop / pause / resume requests on PostgreSQL, written by any process and read by the loop
 * each step.
 *
 * Concurrency: a request locks the rows of the tasks it targets (in id order, the order the
 * other writers of several tasks take), so it is serialized with claims, moves and fenced
 * run writes of those tasks. A task's control row is only written under its task's lock
 * (here, by a fenced run write, or by a move closing a run), so the locked tasks' controls
 * are read once and cannot change behind this request.
 * A stop of every task takes the tasks live when its statement runs: a run that starts
 * meanwhile (its claim not yet committed) starts after the stop, as if it came later, and
 * a live task that finishes meanwhile is re-read by the lock and left out.
 */
import { systemActor } from '../actors.js';
import { asksIfRan, checkNamedTarget, controlReason, controlStep, controlledTask, inAll } from '../control-rules.js';
import { EngineError } from '../errors.js';
import type { ControlRequest } from '../run-store.js';
import type { ControlState } from '../runs.js';
import type { TaskRow } from '../task-rows.js';
import type { TaskEvent } from '../types.js';
import type { Query } from './connection.js';
import { appendEvent, applyMove } from './moves.js';
import { NOTIFY_CONTROLS } from './watch.js';

type Row = TaskRow & Record<string, unknown>;
interface ControlRow {
  task_id: number;
  state: ControlState;
  set_by_role: string | null;
}

const UPSERT = `INSERT INTO controls (task_id, state, reason, updated_at, set_by_role) VALUES ($1, $2, $3, $4, $5)
  ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, reason = excluded.reason, updated_at = excluded.updated_at, set_by_role = excluded.set_by_role`;

// FOR UPDATE takes no UNION: the same set as SQLite's live query, as one condition. The tasks
// of the open runs as an array of ids, so that both sides are read from an index (the states',
// the primary key's): as an EXISTS per row, every task was read (a scan of the table).
export const LIVE_SQL = `SELECT * FROM tasks t
  WHERE t.state IN ('claimed', 'in_progress', 'waiting')
     OR (t.state = 'pending' AND t.id = ANY (ARRAY(SELECT r.task_id FROM runs r WHERE r.finished_at IS NULL)))
  ORDER BY t.id FOR UPDATE`;

/** The targeted tasks, locked in id order, in the request's order; refused as SQLite refuses them. */
async function targets(q: Query, ids: number[], request: ControlRequest): Promise<TaskRow[]> {
  const locked = await q<Row>('SELECT * FROM tasks WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE', [ids]);
  const byId = new Map(locked.map((r) => [r.id, r as TaskRow]));
  return ids.map((id) => {
    const row = byId.get(id);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
    checkNamedTarget(row, request);
    return row;
  });
}

async function set(q: Query, request: ControlRequest, now: number, events: TaskEvent[]): Promise<number[]> {
  const { actor } = request;
  const reason = controlReason(request);
  const rows = request.target === 'all' ? (await q<Row>(LIVE_SQL)).filter((row) => inAll(row as TaskRow, request)) : await targets(q, request.target, request);
  // The controls of the locked tasks, read once and kept up to date below as they are written.
  const controls = new Map(
    (await q<ControlRow>('SELECT task_id, state, set_by_role FROM controls WHERE task_id = ANY($1::bigint[])', [rows.map((r) => r.id)])).map((c) => [c.task_id, c]),
  );
  const put = async (row: TaskRow, to: ControlState) => {
    await q(UPSERT, [row.id, to, reason, now, actor.role]);
    controls.set(row.id, { task_id: row.id, state: to, set_by_role: actor.role });
  };
  const remove = async (row: TaskRow) => {
    await q('DELETE FROM controls WHERE task_id = $1', [row.id]);
    controls.delete(row.id);
  };
  const affected: number[] = [];
  for (const row of rows) {
    const task = controlledTask(row);
    const neverRan = asksIfRan(request, task) ? (await q('SELECT id FROM runs WHERE task_id = $1 AND finished_at IS NULL', [row.id])).length === 0 : undefined;
    const step = controlStep(request, task, controls.get(row.id), neverRan);
    if (step.kind === 'skip') continue;
    if (step.kind === 'resume') {
      await remove(row);
      events.push(await appendEvent(q, row.id, 'run.resume_requested', actor, { reason }, now));
    } else if (step.kind === 'pause') {
      await put(row, 'paused');
      events.push(await appendEvent(q, row.id, 'run.pause_requested', actor, { reason }, now));
    } else if (step.kind === 'cancel') {
      await applyMove(q, row, { to: 'cancelled', actor, reason }, now, events);
      await remove(row);
    } else {
      await put(row, 'stopped');
      events.push(await appendEvent(q, row.id, 'run.stop_requested', actor, { reason }, now));
      if (step.requeue) await applyMove(q, row, { to: 'pending', actor: systemActor('control'), reason }, now, events);
    }
    affected.push(row.id);
  }
  // Delivered with the commit: the runs' control watchers read again (watch.ts).
  if (affected.length > 0) await q(NOTIFY_CONTROLS);
  return affected;
}

export const pgControls = {
  async get(q: Query, taskId: number): Promise<ControlState> {
    return (await q<ControlRow>('SELECT state, set_by_role FROM controls WHERE task_id = $1', [taskId]))[0]?.state ?? 'running';
  },
  /** Every task's control that is not `running` (a task without a row runs). */
  async list(q: Query): Promise<Map<number, ControlState>> {
    return new Map((await q<ControlRow>("SELECT task_id, state FROM controls WHERE state <> 'running'")).map((r) => [r.task_id, r.state]));
  },
  set,
};
