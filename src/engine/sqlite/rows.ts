/** Row shapes of the SQLite schema and their mapping to engine types; the event writer. */
import type { Db } from './connection.js';
import type { Card, Task, TaskEvent, TaskState } from '../types.js';

export interface TaskRow {
  id: number;
  title: string;
  state: TaskState;
  priority: number;
  creator: string;
  assignee: string | null;
  claim_token: string | null;
  worker_id: string | null;
  attempts: number;
  max_attempts: number;
  queue: string;
  for_agent: string | null;
  requires: string | null;
  depends_on: string | null;
  idempotency_key: string | null;
  run_after: number;
  unmet_deps: number;
  lease_ms: number | null;
  lease_expires_at: number | null;
  stale_since: number | null;
  created_at: number;
  updated_at: number;
  card: string;
  result: string | null;
}

export interface EventRow {
  id: number;
  task_id: number | null;
  type: string;
  actor: string;
  data: string;
  created_at: number;
}

export function toTask(row: TaskRow): Task {
  return {
    id: row.id,
    title: row.title,
    state: row.state,
    priority: row.priority,
    creator: row.creator,
    assignee: row.assignee,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    dependsOn: row.depends_on === null ? [] : (JSON.parse(row.depends_on) as number[]),
    queue: row.queue,
    forAgent: row.for_agent,
    requires: row.requires === null ? [] : (JSON.parse(row.requires) as string[]),
    idempotencyKey: row.idempotency_key,
    runAfter: row.run_after,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    leaseExpiresAt: row.lease_expires_at,
    card: JSON.parse(row.card) as Card,
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
  };
}

export function toEvent(row: EventRow): TaskEvent {
  return {
    id: row.id,
    taskId: row.task_id,
    type: row.type,
    actor: row.actor,
    data: JSON.parse(row.data) as Record<string, unknown>,
    createdAt: row.created_at,
  };
}

/** Appends event rows inside the caller's transaction and collects them for the bus. */
export interface EventWriter {
  append(taskId: number | null, type: string, actor: string, data: Record<string, unknown>, at: number): TaskEvent;
}

export function createEventWriter(db: Db): EventWriter {
  const insert = db.prepare(
    'INSERT INTO task_events (task_id, type, actor, data, created_at) VALUES (?, ?, ?, ?, ?)',
  );
  return {
    append(taskId, type, actor, data, at) {
      const info = insert.run(taskId, type, actor, JSON.stringify(data), at);
      return { id: Number(info.lastInsertRowid), taskId, type, actor, data, createdAt: at };
    },
  };
}

/** The statements every adapter module shares. */
export interface Statements {
  getTask: (id: number) => TaskRow | undefined;
}

export function prepareCommon(db: Db): Statements {
  const get = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  return { getTask: (id) => get.get(id) };
}
