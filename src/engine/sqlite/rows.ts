/** Row shapes of the SQLite schema and their mapping to engine types; the event writer. */
import type { Statement } from 'better-sqlite3';
import type { Db } from './connection.js';
import type { Actor, ActorRole, TaskEvent, TaskState } from '../types.js';
import { TASK_COLUMNS, type TaskRow } from '../task-rows.js';

/**
 * Hot-path statements select (or return) exactly TASK_COLUMNS in raw mode and build the row
 * with `rowOf`: an array plus one object literal is several times cheaper than better-sqlite3
 * building a 24-key object by name.
 */
export { type EventRow, type TaskRow, TASK_COLUMNS, toEvent, toTask } from '../task-rows.js';

export const TASK_COLUMN_COUNT = TASK_COLUMNS.split(",").length;

/** A TaskRow from a raw row of TASK_COLUMNS. */
export function rowOf(a: unknown[]): TaskRow {
  return {
    id: a[0] as number,
    title: a[1] as string,
    state: a[2] as TaskState,
    priority: a[3] as number,
    creator: a[4] as string,
    assignee: a[5] as string | null,
    claim_token: a[6] as string | null,
    worker_id: a[7] as string | null,
    attempts: a[8] as number,
    max_attempts: a[9] as number,
    queue: a[10] as string,
    for_agent: a[11] as string | null,
    requires: a[12] as string | null,
    depends_on: a[13] as string | null,
    idempotency_key: a[14] as string | null,
    run_after: a[15] as number,
    unmet_deps: a[16] as number,
    lease_ms: a[17] as number | null,
    lease_expires_at: a[18] as number | null,
    stale_since: a[19] as number | null,
    created_at: a[20] as number,
    updated_at: a[21] as number,
    card: a[22] as string,
    result: a[23] as string | null,
    creator_role: a[24] as ActorRole,
    last_event_id: a[25] as number | null,
  };
}

/** Prepares `SELECT <TASK_COLUMNS> FROM tasks WHERE id = ?` in raw mode, returning a TaskRow. */
export function prepareGetRow(db: Db): (id: number) => TaskRow | undefined {
  const stmt = db.prepare<[number], unknown[]>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ?`).raw(true);
  return (id) => {
    const a = stmt.get(id);
    return a === undefined ? undefined : rowOf(a);
  };
}

/** Appends event rows inside the caller's transaction and collects them for the bus. */
export interface EventWriter {
  /** An event that is not one of the task's own state changes (prev_id NULL, indexed). */
  append(taskId: number | null, type: string, actor: Actor, data: Record<string, unknown>, at: number): TaskEvent;
  /**
   * Appends a task's own events (built by the caller, `id` a placeholder) to its chain, in
   * order, and sets their ids; returns the last id, which the caller MUST store as the task's
   * last_event_id in the same transaction. The first event links to the task's stored
   * last_event_id (read by the INSERT itself), or to `prev` when given: 0 for a new task, or
   * the last_event_id the caller read in this same transaction. `json[i]`, when given, must
   * be exactly `JSON.stringify(events[i].data)` (callers that know the shape build it cheaply).
   */
  appendChain(taskId: number, events: TaskEvent[], json?: ReadonlyArray<string | undefined>, prev?: number): number;
}

const COLUMNS = 'INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at, prev_id) VALUES ';
const LINKED = '(?, ?, ?, ?, ?, ?, ?)';
const LINKED_TO_TASK = '(?, ?, ?, ?, ?, ?, (SELECT coalesce(last_event_id, 0) FROM tasks WHERE id = ?))';
const MAX_ROWS = 4;
/** prev_id of a chained event written right after the previous one: "my id - 1". */
export const PREV_IS_ID_MINUS_1 = -1;

export function createEventWriter(db: Db): EventWriter {
  const insert = db.prepare(
    'INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  // Multi-row inserts of 1 to 4 chained events, the first linked to the task row or not.
  const chained = new Map<string, Statement>();
  const statement = (n: number, toTask: boolean): Statement => {
    const key = `${n}${toTask ? 't' : ''}`;
    let stmt = chained.get(key);
    if (stmt === undefined) {
      const rows = Array.from({ length: n }, (_, i) => (i === 0 && toTask ? LINKED_TO_TASK : LINKED));
      chained.set(key, (stmt = db.prepare(COLUMNS + rows.join(', '))));
    }
    return stmt;
  };
  return {
    append(taskId, type, actor, data, at) {
      const info = insert.run(taskId, type, actor.id, actor.role, JSON.stringify(data), at);
      return { id: Number(info.lastInsertRowid), taskId, type, actor: actor.id, actorRole: actor.role, data, createdAt: at };
    },
    appendChain(taskId, events, json, prev) {
      // The first event links to the task's head; each later one to the event written just
      // before it, whose id is its own minus one: the rows of these inserts get consecutive
      // ids (max(id) + 1 each) since nothing else writes in between.
      let last = 0;
      for (let i = 0; i < events.length; ) {
        const n = Math.min(MAX_ROWS, events.length - i);
        const toTask = i === 0 && prev === undefined;
        const params: unknown[] = [];
        for (let k = i; k < i + n; k++) {
          const e = events[k]!;
          params.push(taskId, e.type, e.actor, e.actorRole, json?.[k] ?? JSON.stringify(e.data), e.createdAt);
          params.push(k === 0 ? (toTask ? taskId : prev) : PREV_IS_ID_MINUS_1);
        }
        last = Number(statement(n, toTask).run(...params).lastInsertRowid);
        for (let k = 0; k < n; k++) events[i + k]!.id = last - n + 1 + k;
        i += n;
      }
      return last;
    },
  };
}

/** The step from an event of a task's chain to the one before it, in SQL over task_events e. */
export const PREV_OF = `CASE WHEN e.prev_id = ${PREV_IS_ID_MINUS_1} THEN e.id - 1 ELSE e.prev_id END`;

/**
 * Deletes every event of a task (its chain and its indexed events) and clears the task's
 * last_event_id; returns how many were deleted. For retention: `DELETE FROM task_events
 * WHERE task_id = ?` has no index to use (task_events_by_task holds only the events
 * outside the chain) and would scan the whole log.
 */
export function prepareDeleteTaskEvents(db: Db): (taskId: number) => number {
  const chain = db.prepare<{ task: number }, number>(
    `WITH RECURSIVE chain(id) AS (
       SELECT last_event_id FROM tasks WHERE id = @task
       UNION ALL
       SELECT ${PREV_OF} FROM chain JOIN task_events e ON e.id = chain.id WHERE ${PREV_OF} BETWEEN 1 AND e.id - 1
     )
     SELECT id FROM chain`,
  ).pluck(true);
  const dropOne = db.prepare('DELETE FROM task_events WHERE id = ? AND task_id = ?');
  const dropIndexed = db.prepare('DELETE FROM task_events WHERE task_id = ? AND prev_id IS NULL');
  const clear = db.prepare('UPDATE tasks SET last_event_id = NULL WHERE id = ? AND last_event_id IS NOT NULL');
  return (taskId) => {
    let n = 0;
    for (const id of chain.all({ task: taskId })) if (id !== null) n += dropOne.run(id, taskId).changes;
    n += dropIndexed.run(taskId).changes;
    clear.run(taskId);
    return n;
  };
}

/** The statements every adapter module shares. */
export interface Statements {
  getTask: (id: number) => TaskRow | undefined;
}

export function prepareCommon(db: Db): Statements {
  return { getTask: prepareGetRow(db) };
}
