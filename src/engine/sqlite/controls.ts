/** Stop / pause / resume requests, written by any process and read by the loop each step. */
import { systemActor } from '../actors.js';
import { mayControl } from '../authority.js';
import { EngineError } from '../errors.js';
import type { ControlRequest } from '../run-store.js';
import type { ControlState } from '../runs.js';
import { isTerminal } from '../states.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import type { ApplyMove } from './moves.js';
import type { EventWriter, TaskRow } from './rows.js';

export interface Controls {
  get(taskId: number): ControlState;
  /** Every task's control that is not `running` (a task without a row runs). */
  list(): Map<number, ControlState>;
  set(request: ControlRequest, now: number, events: TaskEvent[]): number[];
}

export function prepareControls(db: Db, writer: EventWriter, apply: ApplyMove): Controls {
  const get = db.prepare<[number], { state: ControlState; set_by_role: string | null }>('SELECT state, set_by_role FROM controls WHERE task_id = ?');
  const upsert = db.prepare(
    `INSERT INTO controls (task_id, state, reason, updated_at, set_by_role) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, reason = excluded.reason, updated_at = excluded.updated_at, set_by_role = excluded.set_by_role`,
  );
  const remove = db.prepare('DELETE FROM controls WHERE task_id = ?');
  const taskRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  const hasOpenRun = db.prepare<[number], { id: number }>('SELECT id FROM runs WHERE task_id = ? AND finished_at IS NULL');
  const live = db.prepare<[], TaskRow>(
    `SELECT * FROM tasks WHERE state IN ('claimed', 'in_progress', 'waiting')
     UNION SELECT t.* FROM tasks t JOIN runs r ON r.task_id = t.id AND r.finished_at IS NULL WHERE t.state = 'pending'
     ORDER BY id`,
  );

  const all = db.prepare<[], { task_id: number; state: ControlState }>("SELECT task_id, state FROM controls WHERE state <> 'running'");

  return {
    get: (taskId) => get.get(taskId)?.state ?? 'running',
    list: () => new Map(all.all().map((r) => [r.task_id, r.state])),
    set(request, now, events) {
      const { actor, state } = request;
      const reason = request.reason ?? (state === 'stopped' ? 'user_stop' : state === 'paused' ? 'user_pause' : 'user_resume');
      let rows: TaskRow[];
      if (request.target === 'all') {
        rows = live.all();
      } else {
        rows = request.target.map((id) => {
          const row = taskRow.get(id);
          if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
          if (isTerminal(row.state)) throw new EngineError('INVALID_TRANSITION', `task ${id} is ${row.state}; there is no run to ${verb(state)}`, { task_id: id });
          return row;
        });
      }
      const affected: number[] = [];
      for (const row of rows) {
        const verdict = mayControl(actor, { id: row.id, creator: row.creator, creatorRole: row.creator_role, assignee: row.assignee });
        if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id });
        const control = get.get(row.id);
        const current = control?.state ?? 'running';
        if (state === 'running') {
          if (current !== 'paused') {
            if (request.target === 'all') continue;
            throw new EngineError('INVALID_TRANSITION', `task ${row.id} is not paused (control: ${current})`, { task_id: row.id });
          }
          // A pause is lifted by its own authority or a higher one: an operator's pause is the operator's to lift.
          if (!outranks(actor.role, control?.set_by_role ?? 'agent')) {
            throw new EngineError('FORBIDDEN', `task ${row.id}: paused by the ${control?.set_by_role}, so only an operator may resume it (${actor.role} ${actor.id} may not)`, { task_id: row.id });
          }
          remove.run(row.id);
          events.push(writer.append(row.id, 'run.resume_requested', actor, { reason }, now));
        } else if (state === 'paused') {
          if (current === 'stopped') continue;
          upsert.run(row.id, 'paused', reason, now, actor.role);
          events.push(writer.append(row.id, 'run.pause_requested', actor, { reason }, now));
        } else if (row.state === 'pending' && hasOpenRun.get(row.id) === undefined) {
          // Nothing ever ran: stopping it is cancelling it.
          apply(row, { to: 'cancelled', actor, reason }, now, events);
          remove.run(row.id);
        } else {
          upsert.run(row.id, 'stopped', reason, now, actor.role);
          events.push(writer.append(row.id, 'run.stop_requested', actor, { reason }, now));
          // A parked run is finished by the loop: put the task back so a worker resumes it and stops.
          if (row.state === 'waiting') apply(row, { to: 'pending', actor: systemActor('control'), reason }, now, events);
        }
        affected.push(row.id);
      }
      return affected;
    },
  };
}

/** Whether a control set by `setBy` may be lifted by `role`: operators and the system lift anyone's. */
function outranks(role: string, setBy: string): boolean {
  return role === 'operator' || role === 'system' || (setBy !== 'operator' && setBy !== 'system');
}

function verb(state: ControlState): string {
  return state === 'stopped' ? 'stop' : state === 'paused' ? 'pause' : 'resume';
}
