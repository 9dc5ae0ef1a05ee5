/**
 * Claims and heartbeats on PostgreSQL. The best claimable task is taken with
 * `FOR UPDATE SKIP LOCKED`: claimers never wait for a row another claimer holds, and exactly
 * one wins each task. The claim's rules (who may claim, what it writes) are claims.ts's.
 */
import { claimNeeds } from '../claim-needs.js';
import { RELEASE_LIMIT, RELEASE_ROUNDS, checkClaimTarget, claimTerms, claimedData, startedData, takeClaim } from '../claims.js';
import { DEFAULT_QUEUE } from '../creation.js';
import { type TaskRow, heartbeatRefusal, toTask } from '../task-rows.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import { NOW_MS, type Opening, type Query } from './connection.js';
import { appendEvents, lockTask, writeWithEvents } from './moves.js';
import { workChannels } from './watch.js';
import { type Needs, PARAMS, PICK_HAD_CANDIDATES, dueSql, lookSql, pickSql } from './pick.js';

/**
 * Releases the queue's due tasks into the claimable parts, earliest due first, RELEASE_LIMIT
 * at most (claims.ts), passing those another claimer is releasing: in the caller's transaction,
 * or on its own (`query` of the connection) before a claim in one statement. `now` null: the
 * database's clock. When it releases a full RELEASE_LIMIT (more may be due behind them), it
 * wakes the queue's claimers at its commit, as a create does (watch.ts): this one, to come back,
 * and those that may take them. How many it released.
 */
export async function releaseDue(q: Query, queue: string, now: number | null): Promise<number> {
  const [queueChannel, anyChannel] = workChannels({ all: false, queues: new Set([queue]) });
  const notify = (p: string) => `CASE WHEN r.n = ${RELEASE_LIMIT} THEN pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema(), ${p}::text), '') END`;
  const [row] = await q<{ n: number }>(
    `WITH u AS (UPDATE tasks SET delayed = false WHERE id IN (SELECT id FROM tasks WHERE state = 'pending' AND delayed AND queue = $1
       AND run_after <= coalesce($2::bigint, ${NOW_MS}) ORDER BY run_after LIMIT ${RELEASE_LIMIT} FOR UPDATE SKIP LOCKED) RETURNING 1),
     r AS (SELECT count(*)::int AS n FROM u)
     SELECT r.n, ${notify('$3')} AS woke, ${notify('$4')} AS woke_any FROM r`,
    [queue, now, queueChannel, anyChannel],
  );
  return row?.n ?? 0;
}

/**
 * A claim without a task id picks in the transaction's first round trip, with BEGIN and the
 * clock (one reading of it, which the claim then uses): its one row is `now` and the task's
 * columns, all null when nothing is claimable. The claimer's names reach the text as hex.
 */
export function pickOpening(input: ClaimInput, fixedNow: number | undefined): Opening {
  const withCard = input.withCard === true;
  const needs = claimNeeds(input.capabilities);
  const pick = pickSql(withCard, needs.shape, '*', { queue: '$1', agent: '$2', caps: '$3', now: '(SELECT now FROM pick_clock)' });
  return {
    name: `taskloop_pick${withCard ? '_card' : ''}${needs.shape === 0 ? '' : needs.shape === 'walk' ? '_walk' : '_caps'}`,
    sql: `WITH pick_clock AS (SELECT coalesce($4, ${NOW_MS}) AS now), ${pick.with}
     SELECT c.now, ${PICK_HAD_CANDIDATES} AS pick_had, ${dueSql({ queue: '$1', now: 'c.now', agent: '', caps: '' })} AS pick_due, t.* FROM pick_clock c LEFT JOIN (${pick.select}) t ON true`,
    types: ['text', 'text', 'text', 'bigint'],
    args: [input.queue ?? DEFAULT_QUEUE, input.agent, needs.param, fixedNow ?? null],
    givesNow: true,
  };
}

const picked = new WeakMap<Query, Record<string, unknown> | undefined>();
const slowly = new WeakSet<Query>();

/**
 * Whether a claim in this transaction picked `slow`ly: it held other parts' first entries
 * locked to its end, and a claimer that met one may have found nothing though that task stays
 * pending. Its commit then wakes every claimer, as a task put back in the queue does.
 */
export const pickedSlowly = (q: Query): boolean => slowly.has(q);

/** Keeps the row `pickOpening` returned for the body's claim. */
export function primePick(q: Query, row: Record<string, unknown> | undefined): void {
  picked.set(q, row);
}

/** Whether a claim by `input` (without a task id) would find a task now: a read, no lock taken. */
export async function claimable(q: Query, input: ClaimInput, now: number): Promise<boolean> {
  const needs = claimNeeds(input.capabilities);
  const [row] = await q<{ found: boolean }>(`SELECT EXISTS (${lookSql(input.withCard === true, needs.shape, 'id')}) OR ${dueSql(PARAMS)} AS found`, [
    input.queue ?? DEFAULT_QUEUE,
    now,
    input.agent,
    needs.param,
  ]);
  return row?.found === true;
}

/** A pick inside the caller's transaction: the task's columns (null when none), pick_due and, fast, pick_had. */
async function pickIn(q: Query, input: ClaimInput, now: number, slow: boolean): Promise<Record<string, unknown> | undefined> {
  const needs = claimNeeds(input.capabilities);
  const pick = pickSql(input.withCard === true, needs.shape, '*', PARAMS, slow);
  const had = slow ? 'false' : PICK_HAD_CANDIDATES;
  const [found] = await q(`WITH ${pick.with} SELECT ${had} AS pick_had, ${dueSql(PARAMS)} AS pick_due, t.* FROM (SELECT 1) one LEFT JOIN (${pick.select}) t ON true`, [
    input.queue ?? DEFAULT_QUEUE,
    now,
    input.agent,
    needs.param,
  ]);
  return found;
}

/** Claims inside the caller's transaction: the claimed task, or null when none is claimable. */
export async function claimTask(q: Query, input: ClaimInput, now: number, events: TaskEvent[]): Promise<ClaimedTask | null> {
  let row: TaskRow;
  if (input.taskId !== undefined) {
    row = checkClaimTarget(await lockTask(q, input.taskId), input, now);
  } else {
    let found = picked.has(q) ? picked.get(q) : await pickIn(q, input, now, false);
    picked.delete(q);
    if (found?.pick_due === true) {
      // Tasks fell due: into the parts first, then the pick again (the row it chose stays locked
      // to the end: it is passed); again while a full release held nothing for it (claims.ts RELEASE_ROUNDS).
      for (let round = 0; round < RELEASE_ROUNDS; round++) {
        const released = await releaseDue(q, input.queue ?? DEFAULT_QUEUE, now);
        found = await pickIn(q, input, now, false);
        if ((found?.id ?? null) !== null || released < RELEASE_LIMIT) break;
      }
    }
    const { now: _, pick_had: had, pick_due: _due, ...columns } = found ?? {};
    if (columns.id === null || columns.id === undefined) {
      if (had !== true) return null;
      // Other claimers held every entry the pick chose from: pick again, locking each part's first free one.
      slowly.add(q);
      const again = await pickIn(q, input, now, true);
      if (again?.id === null || again?.id === undefined) return null;
      row = again as unknown as TaskRow;
    } else {
      row = columns as unknown as TaskRow;
    }
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
 * The one statement of claimOne (exported for the plan test): $1 queue, $2 agent, $3
 * capabilities, $4 the clock … $14 whether tasks due but not released stop the claim (pick_due: a first statement's).
 */
export function claimOneSql(withCard: boolean, needs: Needs, slow: boolean): string {
  const v = { queue: '$1', agent: '$2', caps: '$3', now: '(SELECT now FROM c)' };
  const pick = pickSql(withCard, needs, 'id', v, slow);
  return `WITH c AS (SELECT coalesce($4::bigint, ${NOW_MS}) AS now),
     d AS (SELECT ${dueSql(v)} AS due),
     ${pick.with},
     p AS (${pick.select}),
     u AS (UPDATE tasks t SET state = $5, assignee = $2, claim_token = $6, attempts = t.attempts + 1, lease_ms = $7::bigint,
       lease_expires_at = c.now + $7::bigint, stale_since = NULL, updated_at = c.now, worker_id = coalesce($8, t.worker_id)
       FROM p, c, d WHERE t.id = p.id AND NOT ($14::boolean AND d.due) RETURNING t.*),
     e AS (INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at)
       SELECT u.id, x.type, $2, 'agent', x.data, u.updated_at
       FROM u CROSS JOIN LATERAL (VALUES
         (1, 'task.claimed', pg_catalog.concat($9::text, u.attempts, $10::text, u.lease_expires_at, $11::text)),
         (2, 'task.transitioned', $12::text)) x(n, type, data)
       WHERE x.n = 1 OR $13::boolean ORDER BY x.n RETURNING id)
     SELECT ${slow ? 'false' : PICK_HAD_CANDIDATES} AS pick_had, (SELECT due FROM d) AS pick_due, u.*, (SELECT pg_catalog.min(id) FROM e) AS first_event, (SELECT pg_catalog.max(id) FROM e) AS last_event
     FROM (SELECT 1) one LEFT JOIN u ON true`;
}

/**
 * A claim without a task id, outside any transaction, in one autocommit statement and one
 * round trip: the pick (`FOR UPDATE SKIP LOCKED`), the row's claim and its events, on one
 * reading of the clock. It writes what `takeClaim` would (claims.ts claimTerms and the
 * events' data): a picked task is pending, which any agent may claim. Null when nothing is
 * claimable; a statement that fails writes nothing. When other claimers held every entry its
 * pick chose from, it picks again `slow`ly (pickSql). When tasks in its queue fell due and no
 * claim has released them yet, its first statement takes nothing, releases them and claims
 * again without waiting for them; it releases again only while a full release held nothing for
 * it (`rounds` so far, `more`: the last was full; claims.ts RELEASE_ROUNDS).
 */
export async function claimOne(
  query: Query,
  input: ClaimInput,
  fixedNow: number | undefined,
  slow = false,
  rounds = 0,
  more = true,
): Promise<{ task: ClaimedTask; row: TaskRow; events: TaskEvent[] } | null> {
  const { state, leaseMs, token } = claimTerms(input);
  const needs = claimNeeds(input.capabilities);
  const [row] = await query<TaskRow & { first_event: number; last_event: number; pick_had: boolean; pick_due: boolean }>(
    claimOneSql(input.withCard === true, needs.shape, slow),
    [
      input.queue ?? DEFAULT_QUEUE,
      input.agent,
      needs.param,
      fixedNow ?? null,
      state,
      token,
      leaseMs,
      input.workerId ?? null,
      ...CLAIMED_TEXT,
      STARTED_TEXT,
      input.start === true,
      rounds === 0,
    ],
  );
  const { first_event: first, last_event: last, pick_had: had, pick_due: due, ...columns } = row!;
  if (columns.id === null && due && more && rounds < RELEASE_ROUNDS) {
    const released = await releaseDue(query, input.queue ?? DEFAULT_QUEUE, fixedNow ?? null);
    return claimOne(query, input, fixedNow, slow, rounds + 1, released === RELEASE_LIMIT);
  }
  // Other claimers held every entry the pick chose from: pick again, locking each part's first free one.
  if (columns.id === null) return had === true ? claimOne(query, input, fixedNow, true, rounds, more) : null;
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
