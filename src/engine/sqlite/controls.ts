/** Stop / pause / resume requests, written by any process and read by the loop each step. */
import { systemActor } from '../actors.js';
import { asksIfRan, checkNamedTarget, controlReason, controlStep, controlledTask, inAll } from '../control-rules.js';
import { EngineError } from '../errors.js';
import type { ControlRequest } from '../run-store.js';
import type { ControlState } from '../runs.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { markWake } from './wake-files.js';
import type { ApplyMove } from './moves.js';
import type { EventWriter, TaskRow } from './rows.js';

export interface Controls {
  get(taskId: number): ControlState;
  /** Every task's control that is not `running` (a task without a row runs). */
  list(): Map<number, ControlState>;
  set(request: ControlRequest, now: number, events: TaskEvent[]): number[];
}

/**
 * The tasks a run may be live on (`--all`'s targets). The pending ones with a live run (a run
 * requeued by a stop, a released one) are found from the open runs (runs_active; CROSS JOIN
 * keeps them first): from the pending tasks, the emergency stop read every one of them inside
 * the write lock (7-10 ms at 100,000 pending).
 */
export const LIVE_SQL = `SELECT * FROM tasks WHERE state IN ('claimed', 'in_progress', 'waiting')
  UNION SELECT t.* FROM runs r CROSS JOIN tasks t ON t.id = r.task_id WHERE r.finished_at IS NULL AND t.state = 'pending'
  ORDER BY id`;

export function prepareControls(db: Db, writer: EventWriter, apply: ApplyMove): Controls {
  const get = db.prepare<[number], { state: ControlState; set_by_role: string | null }>('SELECT state, set_by_role FROM controls WHERE task_id = ?');
  const upsert = db.prepare(
    `INSERT INTO controls (task_id, state, reason, updated_at, set_by_role) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, reason = excluded.reason, updated_at = excluded.updated_at, set_by_role = excluded.set_by_role`,
  );
  const remove = db.prepare('DELETE FROM controls WHERE task_id = ?');
  const taskRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  const hasOpenRun = db.prepare<[number], { id: number }>('SELECT id FROM runs WHERE task_id = ? AND finished_at IS NULL');
  const live = db.prepare<[], TaskRow>(LIVE_SQL);

  const all = db.prepare<[], { task_id: number; state: ControlState }>("SELECT task_id, state FROM controls WHERE state <> 'running'");

  return {
    get: (taskId) => get.get(taskId)?.state ?? 'running',
    list: () => new Map(all.all().map((r) => [r.task_id, r.state])),
    set(request, now, events) {
      const { actor } = request;
      const reason = controlReason(request);
      let rows: TaskRow[];
      if (request.target === 'all') {
        rows = live.all().filter((row) => inAll(row, request));
      } else {
        rows = request.target.map((id) => {
          const row = taskRow.get(id);
          if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
          checkNamedTarget(row, request);
          return row;
        });
      }
      const affected: number[] = [];
      for (const row of rows) {
        const task = controlledTask(row);
        const step = controlStep(request, task, get.get(row.id), asksIfRan(request, task) ? hasOpenRun.get(row.id) === undefined : undefined);
        if (step.kind === 'skip') continue;
        if (step.kind === 'resume') {
          remove.run(row.id);
          events.push(writer.append(row.id, 'run.resume_requested', actor, { reason }, now));
        } else if (step.kind === 'pause') {
          upsert.run(row.id, 'paused', reason, now, actor.role);
          events.push(writer.append(row.id, 'run.pause_requested', actor, { reason }, now));
        } else if (step.kind === 'cancel') {
          apply(row, { to: 'cancelled', actor, reason }, now, events);
          remove.run(row.id);
        } else {
          upsert.run(row.id, 'stopped', reason, now, actor.role);
          events.push(writer.append(row.id, 'run.stop_requested', actor, { reason }, now));
          if (step.requeue) apply(row, { to: 'pending', actor: systemActor('control'), reason }, now, events);
        }
        affected.push(row.id);
      }
      // The runs of every process watch the controls' wake file, not every commit (wake-files.ts).
      if (affected.length > 0) markWake(db, 'controls');
      return affected;
    },
  };
}
