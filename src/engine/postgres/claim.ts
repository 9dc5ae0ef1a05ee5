/**
 * Claims and heartbeats on PostgreSQL. The best claimable task is taken with
 * `FOR UPDATE SKIP LOCKED`: claimers never wait for a row another claimer holds, and exactly
 * one wins each task. The claim's rules (who may claim, what it writes) are claims.ts's.
 */
import { checkClaimTarget, claimTerms, claimedData, startedData, takeClaim } from '../claims.js';
import { DEFAULT_QUEUE } from '../creation.js';
import { type TaskRow, heartbeatRefusal, toTask } from '../task-rows.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import { NOW_MS, type Opening, type Query } from './connection.js';
import { appendEvents, lockTask, writeWithEvents } from './moves.js';

const capsOf = (input: ClaimInput): string => JSON.stringify(input.capabilities ?? []);

// tasks_claimable holds (queue, priority DESC, id) of the pending tasks with no unmet
// dependency: the first eligible entry is the claim (a daemon's pick, of tasks with a card,
// reads tasks_claimable_card). Capabilities are JSON text: a task's
// requirements must be contained in the claimer's.
export const pickSql = (withCard: boolean, columns: string, lock: boolean) =>
  `SELECT ${columns} FROM tasks
   WHERE state = 'pending' AND unmet_deps = 0 AND queue = $1 AND run_after <= $2
     AND (for_agent IS NULL OR for_agent = $3)
     AND (requires IS NULL OR requires::jsonb <@ $4::jsonb)${withCard ? "\n     AND card <> '{}'" : ''}
   ORDER BY priority DESC, id LIMIT 1${lock ? ' FOR UPDATE SKIP LOCKED' : ''}`;

/**
 * A claim without a task id picks in the transaction's first round trip, with BEGIN and the
 * clock (one reading of it, which the claim then uses): its one row is `now` and the task's
 * columns, all null when nothing is claimable. The claimer's names reach the text as hex.
 */
export function pickOpening(input: ClaimInput, fixedNow: number | undefined): Opening {
  const withCard = input.withCard === true;
  const pick = pickSql(withCard, '*', true).replace('$2', 'c.now').replace('$3', '$2').replace('$4', '$3');
  return {
    name: withCard ? 'taskloop_pick_card' : 'taskloop_pick',
    sql: `SELECT c.now, t.* FROM (SELECT coalesce($4, ${NOW_MS}) AS now) c LEFT JOIN LATERAL (${pick}) t ON true`,
    types: ['text', 'text', 'text', 'bigint'],
    args: [input.queue ?? DEFAULT_QUEUE, input.agent, capsOf(input), fixedNow ?? null],
    givesNow: true,
  };
}

const picked = new WeakMap<Query, Record<string, unknown> | undefined>();

/** Keeps the row `pickOpening` returned for the body's claim. */
export function primePick(q: Query, row: Record<string, unknown> | undefined): void {
  picked.set(q, row);
}

/** Whether a claim by `input` (without a task id) would find a task now: a read, no lock taken. */
export async function claimable(q: Query, input: ClaimInput, now: number): Promise<boolean> {
  const rows = await q(pickSql(input.withCard === true, 'id', false), [input.queue ?? DEFAULT_QUEUE, now, input.agent, capsOf(input)]);
  return rows.length > 0;
}

/** Claims inside the caller's transaction: the claimed task, or null when none is claimable. */
export async function claimTask(q: Query, input: ClaimInput, now: number, events: TaskEvent[]): Promise<ClaimedTask | null> {
  let row: TaskRow;
  if (input.taskId !== undefined) {
    row = checkClaimTarget(await lockTask(q, input.taskId), input, now);
  } else if (picked.has(q)) {
    const found = picked.get(q);
    picked.delete(q);
    if (found === undefined || found.id === null) return null;
    const { now: _, ...columns } = found;
    row = columns as unknown as TaskRow;
  } else {
    const [first] = await q<TaskRow & Record<string, unknown>>(pickSql(input.withCard === true, '*', true), [
      input.queue ?? DEFAULT_QUEUE,
      now,
      input.agent,
      capsOf(input),
    ]);
    if (first === undefined) return null;
    row = first;
  }
  const taken = takeClaim(row, input, now);
  await appendEvents(q, taken.events);
  events.push(...taken.events);
  await writeWithEvents(q, [
    {
      sql: `UPDATE tasks SET state = $1, assignee = $2, claim_token = $3, attempts = $4, lease_ms = $5, lease_expires_at = $6,
       stale_since = NULL, updated_at = $7, worker_id = $8 WHERE id = $9`,
      params: [row.state, row.assignee, row.claim_token, row.attempts, row.lease_ms, row.lease_expires_at, now, row.worker_id, row.id],
    },
  ]);
  const task = toTask(row) as ClaimedTask;
  task.claimToken = taken.token;
  return task;
}

// The claimed event's JSON text around its two numbers, from claims.ts's own data (so the
// one-statement claim's event is byte for byte the transaction's): [head, middle, tail].
const CLAIMED_TEXT = JSON.stringify(claimedData(-1, -2)).split(/-[12]/);
const STARTED_TEXT = JSON.stringify(startedData());

/**
 * A claim without a task id, outside any transaction, in one autocommit statement and one
 * round trip: the pick (`FOR UPDATE SKIP LOCKED`), the row's claim and its events, on one
 * reading of the clock. It writes what `takeClaim` would (claims.ts claimTerms and the
 * events' data): a picked task is pending, which any agent may claim. Null when nothing is
 * claimable; a statement that fails writes nothing.
 */
export async function claimOne(query: Query, input: ClaimInput, fixedNow: number | undefined): Promise<{ task: ClaimedTask; row: TaskRow; events: TaskEvent[] } | null> {
  const { state, leaseMs, token } = claimTerms(input);
  const pick = pickSql(input.withCard === true, 'id', true).replace('$2', '(SELECT now FROM c)').replace('$3', '$2').replace('$4', '$3');
  const [row] = await query<TaskRow & { first_event: number; last_event: number }>(
    `WITH c AS (SELECT coalesce($4::bigint, ${NOW_MS}) AS now),
     p AS (${pick}),
     u AS (UPDATE tasks t SET state = $5, assignee = $2, claim_token = $6, attempts = t.attempts + 1, lease_ms = $7::bigint,
       lease_expires_at = c.now + $7::bigint, stale_since = NULL, updated_at = c.now, worker_id = coalesce($8, t.worker_id)
       FROM p, c WHERE t.id = p.id RETURNING t.*),
     e AS (INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at)
       SELECT u.id, x.type, $2, 'agent', x.data, u.updated_at
       FROM u CROSS JOIN LATERAL (VALUES
         (1, 'task.claimed', pg_catalog.concat($9::text, u.attempts, $10::text, u.lease_expires_at, $11::text)),
         (2, 'task.transitioned', $12::text)) x(n, type, data)
       WHERE x.n = 1 OR $13::boolean ORDER BY x.n RETURNING id)
     SELECT u.*, (SELECT pg_catalog.min(id) FROM e) AS first_event, (SELECT pg_catalog.max(id) FROM e) AS last_event FROM u`,
    [
      input.queue ?? DEFAULT_QUEUE,
      input.agent,
      capsOf(input),
      fixedNow ?? null,
      state,
      token,
      leaseMs,
      input.workerId ?? null,
      ...CLAIMED_TEXT,
      STARTED_TEXT,
      input.start === true,
    ],
  );
  if (row === undefined) return null;
  const { first_event: first, last_event: last, ...columns } = row;
  const task = toTask(columns as TaskRow) as ClaimedTask;
  task.claimToken = token;
  const event = (id: number, type: string, data: Record<string, unknown>): TaskEvent => ({
    id,
    taskId: task.id,
    type,
    actor: input.agent,
    actorRole: 'agent',
    data,
    createdAt: columns.updated_at,
  });
  const events = [event(first, 'task.claimed', claimedData(columns.attempts, columns.lease_expires_at!))];
  if (input.start === true) events.push(event(last, 'task.transitioned', startedData()));
  return { task, row: columns as TaskRow, events };
}

/** Extends a lease, in one statement on the database's clock (or the test clock, `now`). */
export async function heartbeat(q: Query, input: HeartbeatInput, now: number | undefined): Promise<number> {
  const [row] = await q<{ lease_expires_at: number }>(
    `UPDATE tasks SET lease_expires_at = coalesce($5::bigint, ${NOW_MS}) + coalesce($4::bigint, lease_ms), stale_since = NULL
     WHERE id = $1 AND claim_token = $2 AND assignee = $3 AND state IN ('claimed', 'in_progress')
     RETURNING lease_expires_at`,
    [input.taskId, input.claimToken, input.agent, input.leaseMs ?? null, now ?? null],
  );
  if (row !== undefined) return row.lease_expires_at;
  const [task] = await q<TaskRow & Record<string, unknown>>('SELECT * FROM tasks WHERE id = $1', [input.taskId]);
  throw heartbeatRefusal(input.taskId, input.agent, task);
}
