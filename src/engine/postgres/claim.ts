/**
 * Claims and heartbeats on PostgreSQL. The best claimable task is taken with
 * `FOR UPDATE SKIP LOCKED`: claimers never wait for a row another claimer holds, and exactly
 * one wins each task. The claim's rules (who may claim, what it writes) are claims.ts's.
 */
import { type ClaimNeeds, claimNeeds } from '../claim-needs.js';
import { RELEASE_LIMIT, checkClaimTarget, claimTerms, claimedData, startedData, takeClaim } from '../claims.js';
import { DEFAULT_QUEUE } from '../creation.js';
import { type TaskRow, heartbeatRefusal, toTask } from '../task-rows.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import { NOW_MS, type Opening, type Query } from './connection.js';
import { appendEvents, lockTask, writeWithEvents } from './moves.js';

type Needs = ClaimNeeds['shape'];

/** Where a pick's values come from: a parameter ($n) or an expression (the transaction's clock). */
export type PickValues = { queue: string; now: string; agent: string; caps: string };
const PARAMS: PickValues = { queue: '$1', now: '$2', agent: '$3', caps: '$4' };

/**
 * A part of the claimable tasks: its terms, and for the parts read by requirement set
 * (`sets`, a JSON array of the set texts to look up) the lookup of each: one LATERAL over the
 * sets, so that the statement (and its planning) is the same however many sets a claimer
 * covers. As one part per set it was 32 for a claimer offering four capabilities, planned in
 * 3.9 ms (against 0.5 without), which behind a pooler (no named statements) was every claim.
 */
type Part = { where: string; sets?: string };

/**
 * The parts of the claimable tasks this claimer may take from, each with its own partial
 * index in claim order (schema versions 6 to 8, as SQLite's 10 to 12): those anyone may claim
 * (tasks_ready_open), those reserved for this agent that require nothing
 * (tasks_ready_for), and for a claimer with capabilities those that require some: looked
 * up by each requirement set its capabilities cover, not reserved and reserved for it
 * (tasks_ready_needs_set and _for; claim-needs.ts), or past MAX_LOOKED_UP walked in claim
 * order (tasks_ready_needs_walk). In one index a claim stepped over every task reserved
 * for another agent or requiring what it lacked, so an agent could make every claim slow by
 * creating such tasks. The capabilities' parameter is JSON text: the sets to look up, or (a
 * walk) the capabilities a task's requirements must be contained in. A task not yet due is in
 * no part (version 9, the parts named tasks_ready_* since): see dueSql.
 */
function pickParts(v: PickValues, withCard: boolean, needs: Needs): Part[] {
  // run_after too, though a task in a part is due: one written before version 9 by a build still
  // running (`delayed` false), or on a clock ahead of this one, is still not handed out early.
  const base = `state = 'pending' AND unmet_deps = 0 AND NOT delayed AND queue = ${v.queue} AND run_after <= ${v.now}${withCard ? " AND card <> '{}'" : ''}`;
  // As a CASE: the planner guesses `<@` matches one row in a thousand, and then reads a whole
  // part (every task requiring capabilities) through a bitmap and sorts it, on every claim,
  // where walking the part in claim order stops at its first match. A CASE it guesses at half.
  const meets = `CASE WHEN requires::jsonb <@ ${v.caps}::jsonb THEN true ELSE false END`;
  const parts: Part[] = [{ where: `${base} AND for_agent IS NULL AND requires IS NULL` }, { where: `${base} AND for_agent = ${v.agent} AND requires IS NULL` }];
  // length(requires) > 0: tasks_claimable_needs_walk's WHERE (schema.ts, version 8).
  if (needs === 'walk') parts.push({ where: `${base} AND requires IS NOT NULL AND length(requires) > 0 AND (for_agent IS NULL OR for_agent = ${v.agent}) AND ${meets}` });
  else if (needs > 0) parts.push({ where: `${base} AND for_agent IS NULL`, sets: `${v.caps}::jsonb` }, { where: `${base} AND for_agent = ${v.agent}`, sets: `${v.caps}::jsonb` });
  // Without those parts the capabilities' parameter goes unread, and an unread parameter has no
  // type the server can tell: it is read here, always true ('[]' at least), to give it one.
  else parts[0]!.where += ` AND ${v.caps}::text IS NOT NULL`;
  return parts;
}
const ORDER = 'ORDER BY priority DESC, id';
/** How many of each part's first entries a locking pick tries before it falls back to locking each part's first unlocked one. */
const CANDIDATES = 4;

/** The first `limit` entries of `part` in claim order, as `cols` (with id and priority, or *), each with `lock`. */
function firsts(part: Part, cols: string, limit: number, lock = ''): string {
  if (part.sets === undefined) return `SELECT ${cols} FROM tasks WHERE ${part.where} ${ORDER} LIMIT ${limit}${lock}`;
  return `SELECT x.* FROM jsonb_array_elements_text(${part.sets}) s(r)
       CROSS JOIN LATERAL (SELECT ${cols} FROM tasks WHERE ${part.where} AND requires = s.r ${ORDER} LIMIT ${limit}${lock}) x
       ORDER BY x.priority DESC, x.id LIMIT ${limit}`;
}

/**
 * Whether the queue holds tasks due that no claim has released yet: read beside every pick
 * (from tasks_delayed, by queue and due time: one entry when none is due). A pick that sees
 * some takes nothing; its claimer releases them (releaseDue) and picks again, so a task that
 * falls due takes its place in claim order. In the parts, every claim stepped over each task
 * not yet due: 7 ms a claim behind an operator's 25,000 reminders due in 2100.
 */
export const dueSql = (v: PickValues): string =>
  `EXISTS (SELECT 1 FROM tasks WHERE state = 'pending' AND delayed AND queue = ${v.queue} AND run_after <= ${v.now})`;

/**
 * Releases the queue's due tasks into the claimable parts, earliest due first, RELEASE_LIMIT
 * at most (claims.ts), passing those another claimer is releasing: in the caller's transaction,
 * or on its own (`query` of the connection) before a claim in one statement. `now` null: the
 * database's clock.
 */
export async function releaseDue(q: Query, queue: string, now: number | null): Promise<void> {
  await q(
    `UPDATE tasks SET delayed = false WHERE id IN (SELECT id FROM tasks WHERE state = 'pending' AND delayed AND queue = $1
       AND run_after <= coalesce($2::bigint, ${NOW_MS}) ORDER BY run_after LIMIT ${RELEASE_LIMIT} FOR UPDATE SKIP LOCKED)`,
    [queue, now],
  );
}

/** Whether a row is in `part`: its terms, as a condition on the row. */
const holds = (part: Part): string => (part.sets === undefined ? part.where : `${part.where} AND requires IN (SELECT jsonb_array_elements_text(${part.sets}))`);

/** A look (no lock): the best of each part's first entry (claimable adds the due ones not yet released). */
export const lookSql = (withCard: boolean, needs: Needs, columns: string, v: PickValues = PARAMS): string =>
  `SELECT ${columns} FROM tasks WHERE id = (SELECT id FROM (${pickParts(v, withCard, needs)
    .map((part) => `(${firsts(part, 'id, priority', 1)})`)
    .join(' UNION ALL ')}) f ${ORDER} LIMIT 1)`;

/**
 * A pick that locks the task it returns (FOR UPDATE SKIP LOCKED), as CTEs (`with`, names
 * starting pick_) and the SELECT that reads them (`select`, one row or none).
 * - `fast`: it takes the first CANDIDATES entries of each part without a lock and locks the
 *   best of them still claimable (SKIP LOCKED passes those other claimers hold). It locks no
 *   other row. A part with CANDIDATES entries may hold more past them: none ranked after its
 *   last entry is taken (pick_edge), since a better one may wait there. So none found with
 *   some there (pick_cand) means other claimers hold what it could take, and the caller picks
 *   again `slow`ly.
 * - `slow`: it locks each part's first free entry and takes the best, leaving the others
 *   locked until its transaction ends (a claimer that meets one passes it, as it passes a task
 *   being claimed, and may find nothing: a transaction that picked slowly wakes every claimer
 *   at its commit, pickedSlowly). The rows it returns are the locked ones, as they are now: a
 *   task claimed and given back while the statement ran has its new attempt count.
 */
export function pickSql(withCard: boolean, needs: Needs, columns: string, v: PickValues = PARAMS, slow = false): { with: string; select: string } {
  const parts = pickParts(v, withCard, needs);
  if (slow) {
    const taken = columns === '*' ? '*' : `${columns}, priority`;
    const locked = parts.map((part, i) => `pick_first${i} AS (${firsts(part, taken, 1, ' FOR UPDATE SKIP LOCKED')})`);
    return {
      with: locked.join(',\n     '),
      select: `SELECT ${columns} FROM (${locked.map((_, i) => `SELECT * FROM pick_first${i}`).join(' UNION ALL ')}) f ${ORDER} LIMIT 1`,
    };
  }
  const candidates = parts.map((part, i) => `(SELECT ${i} AS part, c.id, c.priority FROM (${firsts(part, 'id, priority', CANDIDATES)}) c)`).join(' UNION ALL ');
  // Still claimable (re-checked on the row's newest version once locked), as a CASE: as plain
  // terms they matched the parts' indexes, and the planner read every claimable task through
  // them (27,000 rows, 45 ms) to keep the few ids pick_cand holds.
  const still = `CASE WHEN ${parts.map((part) => `(${holds(part)})`).join(' OR ')} THEN true ELSE false END`;
  const after = (x: string, e: string) => `(${x}.priority < ${e}.priority OR (${x}.priority = ${e}.priority AND ${x}.id > ${e}.id))`;
  return {
    with: [
      `pick_cand AS MATERIALIZED (${candidates})`,
      // The last entry of each part that had CANDIDATES of them; the best ranked of those.
      `pick_edge AS (SELECT c.priority, c.id FROM pick_cand c
         WHERE (SELECT count(*) FROM pick_cand d WHERE d.part = c.part) = ${CANDIDATES}
           AND NOT EXISTS (SELECT 1 FROM pick_cand d WHERE d.part = c.part AND ${after('d', 'c')})
         ${ORDER} LIMIT 1)`,
    ].join(',\n     '),
    select: `SELECT ${columns} FROM tasks WHERE id IN (SELECT id FROM pick_cand) AND ${still}
       AND NOT EXISTS (SELECT 1 FROM pick_edge e WHERE ${after('tasks', 'e')}) ${ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED`,
  };
}
/** An SQL expression: whether a fast pick had entries to choose from (read beside its result). */
export const PICK_HAD_CANDIDATES = 'EXISTS (SELECT 1 FROM pick_cand)';

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
      // Tasks fell due: into the parts first, then the pick again (the row it chose stays locked to the end: it is passed).
      await releaseDue(q, input.queue ?? DEFAULT_QUEUE, now);
      found = await pickIn(q, input, now, false);
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
 * capabilities, $4 the clock … $14 whether tasks due but not released stop the claim (pick_due).
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
 * claim has released them yet, it takes nothing, releases them and claims again (`released`).
 */
export async function claimOne(
  query: Query,
  input: ClaimInput,
  fixedNow: number | undefined,
  slow = false,
  released = false,
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
      !released,
    ],
  );
  const { first_event: first, last_event: last, pick_had: had, pick_due: due, ...columns } = row!;
  if (columns.id === null && due && !released) {
    await releaseDue(query, input.queue ?? DEFAULT_QUEUE, fixedNow ?? null);
    return claimOne(query, input, fixedNow, slow, true);
  }
  // Other claimers held every entry the pick chose from: pick again, locking each part's first free one.
  if (columns.id === null) return had === true ? claimOne(query, input, fixedNow, true, released) : null;
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
