/** Read queries: one task with its events, filtered lists, the event log by cursor, counts. */
import { EngineError } from '../errors.js';
import type { ReadEventsQuery } from '../store.js';
import type { FindTasksQuery, Task, TaskEvent, TaskStats, TaskWithEvents } from '../types.js';
import { TASK_STATES } from '../types.js';
import type { Db } from './connection.js';
import { type EventRow, type TaskRow, toEvent, toTask } from './rows.js';

export interface Reads {
  getTask(id: number, withEvents: boolean): TaskWithEvents;
  findTasks(query: FindTasksQuery): Task[];
  readEvents(query: ReadEventsQuery): TaskEvent[];
  stats(): TaskStats;
}

export const DEFAULT_PAGE = 100;

export function prepareReads(db: Db): Reads {
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  const eventsOf = db.prepare<[number], EventRow>('SELECT * FROM task_events WHERE task_id = ? ORDER BY id');
  const eventsAfter = db.prepare<[number, number], EventRow>('SELECT * FROM task_events WHERE id > ? ORDER BY id LIMIT ?');
  const taskEventsAfter = db.prepare<[number, number, number], EventRow>(
    'SELECT * FROM task_events WHERE task_id = ? AND id > ? ORDER BY id LIMIT ?',
  );
  const counts = db.prepare<[], { state: string; n: number }>('SELECT state, count(*) AS n FROM tasks GROUP BY state');
  const lastEvent = db.prepare<[], { id: number | null }>('SELECT max(id) AS id FROM task_events');

  return {
    getTask(id, withEvents) {
      const row = getRow.get(id);
      if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
      return { ...toTask(row), events: withEvents ? eventsOf.all(id).map(toEvent) : [] };
    },
    findTasks(query) {
      const where: string[] = [];
      const params: unknown[] = [];
      if (query.states !== undefined && query.states.length > 0) {
        where.push(`state IN (${query.states.map(() => '?').join(', ')})`);
        params.push(...query.states);
      }
      if (query.assignee !== undefined) (where.push('assignee = ?'), params.push(query.assignee));
      if (query.creator !== undefined) (where.push('creator = ?'), params.push(query.creator));
      if (query.queue !== undefined) (where.push('queue = ?'), params.push(query.queue));
      if (query.afterId !== undefined) (where.push('id > ?'), params.push(query.afterId));
      const sql = `SELECT * FROM tasks ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT ?`;
      params.push(query.limit ?? DEFAULT_PAGE);
      return db.prepare<unknown[], TaskRow>(sql).all(...params).map(toTask);
    },
    readEvents(query) {
      const after = query.afterId ?? 0;
      const limit = query.limit ?? 1000;
      const rows = query.taskId === undefined ? eventsAfter.all(after, limit) : taskEventsAfter.all(query.taskId, after, limit);
      return rows.map(toEvent);
    },
    stats() {
      const byState = Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as TaskStats['byState'];
      for (const { state, n } of counts.all()) byState[state as keyof typeof byState] = n;
      return { byState, lastEventId: lastEvent.get()?.id ?? 0 };
    },
  };
}
