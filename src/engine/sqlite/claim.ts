/** Claims and heartbeats: the fenced lease of a task. */
import { randomUUID } from 'node:crypto';
import { EngineError } from '../errors.js';
import { asAgent } from '../actors.js';
import { checkClaim } from '../states.js';
import { RELEASE_LIMIT, RELEASE_ROUNDS, checkClaimTarget, hasCapabilities } from '../claims.js';
import { type ClaimNeeds, claimNeeds } from '../claim-needs.js';
import { heartbeatRefusal } from '../task-rows.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { DEFAULT_LEASE_MS, DEFAULT_QUEUE } from '../creation.js';
import { type EventWriter, type TaskRow, TASK_COLUMNS, prepareGetRow, rowOf, toTask } from './rows.js';
import { markWorkIn } from './wake-files.js';

export { DEFAULT_LEASE_MS } from '../creation.js';

export type Claim = (input: ClaimInput, now: number, events: TaskEvent[]) => ClaimedTask | null;
/** Whether a claim by `input` (without a task id) would find a task now: a read, outside any transaction. */
export type Claimable = (input: ClaimInput, now: number) => boolean;
export type Heartbeat = (input: HeartbeatInput, now: number) => number;

// The events' data as JSON.stringify writes it (both numbers are safe integers).
const claimedJson = (attempt: number, leaseExpiresAt: number): string =>
  `{"from":"pending","to":"claimed","attempt":${attempt},"lease_expires_at":${leaseExpiresAt}}`;
const STARTED_JSON = '{"from":"claimed","to":"in_progress"}';

/*
 * The best claimable task: the best of the first eligible entries of the partial indexes of
 * the claimable tasks (migrations 11 and 12), each in claim order (priority DESC, id) within
 * its key:
 * - tasks_claimable_open: the tasks any agent may claim (reserved for none, requiring nothing);
 * - tasks_claimable_for: those reserved for one agent that require nothing, read for this
 *   claimer alone;
 * - tasks_claimable_needs: those that require capabilities (reserved or not), read only by a
 *   claimer that offers some. Also keyed by their requirement set (migration 12): a claimer
 *   looks up each set its capabilities cover, not reserved (tasks_claimable_needs_set) and
 *   reserved for it (tasks_claimable_needs_for) (claim-needs.ts): one correlated lookup per set
 *   over the JSON array of them, so that the statement is the same for one set or 255 (as
 *   UNION ALL terms, SQLite's limit of 500 terms would have capped it at seven capabilities).
 *   One offering more than MAX_LOOKED_UP walks the part in claim order, checking each task's
 *   set (`walk`).
 * In one index the claim stepped over every task it could not take: an agent that created
 * 25,000 tasks reserved for a made-up agent (or requiring a capability no one has), at the
 * priority everyone's work has, made every claim in its queue 120x (240x) slower, 5 ms (10 ms)
 * inside the write lock: the whole file's writes. A daemon's pick (withCard) reads the _card
 * twin of each, which holds only tasks with a card (migration 8): tasks waiting for agents
 * are not in its way. Nor are tasks not yet due (migration 13): they are `delayed`, in
 * tasks_delayed alone, until a claim in their queue releases them (releaseSql). What is left to
 * step over: for a claimer that walks, tasks requiring what it lacks.
 */
const MEETS_CAPS = 'NOT EXISTS (SELECT 1 FROM json_each(tasks.requires) AS r WHERE r.value NOT IN (SELECT value FROM json_each(@caps)))';
/**
 * What a pick reads of the needs part: nothing, every set looked up, a walk, or one task
 * already found (`given`, the window's: see preparePicks). Picks are prepared once per shape.
 */
type Shape = 'none' | 'sets' | 'walk' | 'given';
const shapeOf = (needs: ClaimNeeds['shape']): Shape => (needs === 'walk' ? 'walk' : needs > 0 ? 'sets' : 'none');
const partOf = (withCard: boolean) => `state = 'pending' AND unmet_deps = 0 AND delayed = 0${withCard ? " AND card <> '{}'" : ''} AND queue = @queue`;
// run_after too, though a task in a part is due: one written `delayed = 0` by a build before
// migration 13 still running (it can create, though no longer claim: its picks name these
// indexes with terms that no longer imply their conditions), or on a clock ahead of this one,
// is still not handed out early.
const baseOf = (withCard: boolean) => `${partOf(withCard)} AND run_after <= @now`;
export const pickSql = (withCard: boolean, needs: ClaimNeeds['shape'] | 'given', columns = TASK_COLUMNS) => {
  const twin = withCard ? '_card' : '';
  const base = baseOf(withCard);
  const ordered = (cols: string, index: string, terms: string) =>
    `SELECT ${cols} FROM tasks INDEXED BY ${index}${twin} WHERE ${base} AND ${terms} ORDER BY priority DESC, id LIMIT 1`;
  const first = (index: string, terms: string) => `SELECT * FROM (${ordered('id, priority', index, terms)})`;
  const firsts = [
    first('tasks_claimable_open', 'for_agent IS NULL AND requires IS NULL'),
    first('tasks_claimable_for', 'for_agent = @agent AND requires IS NULL'),
  ];
  const shape = needs === 'given' ? needs : shapeOf(needs);
  if (shape === 'given') {
    firsts.push(`SELECT id, priority FROM tasks WHERE id = @given AND ${base}`);
  } else if (shape === 'walk') {
    firsts.push(first('tasks_claimable_needs', `requires IS NOT NULL AND (for_agent IS NULL OR for_agent = @agent) AND ${MEETS_CAPS}`));
  } else if (shape === 'sets') {
    // Each set's first entry, anyone's and reserved for this claimer, then their rows' ranks.
    firsts.push(`SELECT t.id, t.priority FROM (SELECT (${ordered('id', 'tasks_claimable_needs_set', 'requires = s.value AND for_agent IS NULL')}) AS anyone,
         (${ordered('id', 'tasks_claimable_needs_for', 'for_agent = @agent AND requires = s.value')}) AS reserved
       FROM json_each(@caps) AS s) f JOIN tasks t ON t.id IN (f.anyone, f.reserved)`);
  }
  return `SELECT ${columns} FROM tasks WHERE id = (SELECT id FROM (${firsts.join('\n     UNION ALL ')}) ORDER BY priority DESC, id LIMIT 1)`;
};

type Pick = { get(params: Record<string, unknown>): unknown[] | undefined };
type Window = { all(params: Record<string, unknown>): Array<[number, string, string | null, number]> };
/**
 * A claimer whose sets are more than WINDOW_PAST (five to eight capabilities: 31 to 255 sets,
 * up to ~0.22 ms of lookups inside the write lock, flood or not) first reads the needs part's
 * first WINDOW entries in claim order, as a walk would, and checks them here: the first it may
 * take is the part's best; fewer than WINDOW and none it may take, the part has none for it.
 * Only a full window of tasks it cannot take (a flood) sends it to the lookups. Up to four
 * capabilities, the lookups cost no more than the window (30 at most).
 */
const WINDOW = 16;
const WINDOW_PAST = 15;
/** The picks (with a card or not, by the shape of the claimer's capabilities), selecting `columns`, each prepared when first used. */
function preparePicks(db: Db, columns: string): (input: ClaimInput, now: number) => unknown[] | undefined {
  const picks = new Map<string, Pick>();
  const windows = new Map<boolean, Window>();
  const pickOf = (withCard: boolean, shape: ClaimNeeds['shape'] | 'given'): Pick => {
    const key = `${withCard}${shape === 'given' ? shape : shapeOf(shape)}`;
    let pick = picks.get(key);
    if (pick === undefined) picks.set(key, (pick = db.prepare<unknown[], unknown[]>(pickSql(withCard, shape, columns)).raw(true) as Pick));
    return pick;
  };
  const windowOf = (withCard: boolean): Window => {
    let w = windows.get(withCard);
    if (w === undefined) windows.set(withCard, (w = db.prepare(windowSql(withCard)).raw(true) as unknown as Window));
    return w;
  };
  return (input, now) => {
    const needs = claimNeeds(input.capabilities);
    const withCard = input.withCard === true;
    const params = { queue: input.queue ?? DEFAULT_QUEUE, now, agent: input.agent, caps: needs.param, given: null as number | null };
    if (typeof needs.shape === 'number' && needs.shape > WINDOW_PAST) {
      const rows = windowOf(withCard).all(params);
      const mine = rows.find(
        ([, requires, forAgent, runAfter]) => runAfter <= now && (forAgent === null || forAgent === input.agent) && hasCapabilities(requires, input.capabilities),
      );
      if (mine !== undefined || rows.length < WINDOW) {
        params.given = mine?.[0] ?? null;
        return pickOf(withCard, 'given').get(params);
      }
    }
    return pickOf(withCard, needs.shape).get(params);
  };
}

/**
 * The needs part's first WINDOW entries in claim order (exported for the plan test): id,
 * requires, for_agent, run_after. A task not yet due is not in the part (migration 13); one
 * that is there all the same (see baseOf) counts as one it cannot take: as a term, run_after
 * would have the window read past as many of them as there were.
 */
export const windowSql = (withCard: boolean): string =>
  `SELECT id, requires, for_agent, run_after FROM tasks INDEXED BY tasks_claimable_needs${withCard ? '_card' : ''}
     WHERE ${partOf(withCard)} AND requires IS NOT NULL
     ORDER BY priority DESC, id LIMIT ${WINDOW}`;

/**
 * The due tasks of a queue, released into the claimable parts (exported for the plan test):
 * read from tasks_delayed from the earliest due, so a claim with none due reads one entry.
 */
export const releaseSql = `UPDATE tasks SET delayed = 0 WHERE id IN (
    SELECT id FROM tasks INDEXED BY tasks_delayed WHERE state = 'pending' AND delayed = 1 AND queue = @queue AND run_after <= @now
    ORDER BY run_after LIMIT ${RELEASE_LIMIT})`;
const dueSql = `SELECT 1 FROM tasks INDEXED BY tasks_delayed WHERE state = 'pending' AND delayed = 1 AND queue = @queue AND run_after <= @now LIMIT 1`;

/**
 * Whether a claim would find a task: one in the parts, or one that is due but not yet
 * released (the claim releases it; if it is not for this claimer, the claim finds nothing and
 * the next look does not see it again).
 */
export function prepareClaimable(db: Db): Claimable {
  const pick = preparePicks(db, 'id');
  const due = db.prepare(dueSql).pluck(true);
  return (input, now) => pick(input, now) !== undefined || due.get({ queue: input.queue ?? DEFAULT_QUEUE, now }) !== undefined;
}

export function prepareClaim(db: Db, writer: EventWriter): Claim {
  const pick = preparePicks(db, TASK_COLUMNS);
  const getRow = prepareGetRow(db);
  // The claimed row is the picked one with these columns set, so it is built in JS instead of
  // read back (RETURNING costs an ephemeral table and a second full row). A pending task has
  // no worker_id, so worker_id is assigned only when a worker takes the claim: assigning it
  // at all would make SQLite re-check the tasks_by_worker index.
  const takeSql = (withWorker: boolean) =>
    `UPDATE tasks SET state = ?, assignee = ?, claim_token = ?, attempts = ?, lease_ms = ?, lease_expires_at = ?,
       stale_since = NULL, updated_at = ?, last_event_id = ?${withWorker ? ', worker_id = ?' : ''}
     WHERE id = ?`;
  const take = db.prepare(takeSql(false));
  const release = db.prepare(releaseSql);
  const anyDue = db.prepare(dueSql).pluck(true);
  const takeWithWorker = db.prepare(takeSql(true));


  // The queue and time of the last claim that gave up releasing (RELEASE_ROUNDS full releases,
  // nothing for it): a daemon's group commit runs many claims in one transaction at one `now`,
  // and each releasing its RELEASE_ROUNDS held the write lock for all of them (16: 133 ms).
  let gaveUp: { queue: string; now: number } | undefined;
  return (input, now, events) => {
    let row: TaskRow;
    if (input.taskId !== undefined) {
      row = checkClaimTarget(getRow(input.taskId), input, now);
    } else {
      const due = { queue: input.queue ?? DEFAULT_QUEUE, now };
      const rounds = gaveUp?.queue === due.queue && gaveUp.now === now ? 0 : RELEASE_ROUNDS;
      let raw: unknown[] | undefined;
      for (let round = 0; ; round++) {
        // A read first: most claims find none due, and the update costs 3-5 µs more than the read.
        const released = round < rounds && anyDue.get(due) !== undefined ? release.run(due).changes : 0;
        // A full release may leave more due behind it: wake the queue's claimers (this one too) to come back.
        if (released === RELEASE_LIMIT) markWorkIn(db, due.queue);
        raw = pick(input, now);
        // Nothing it may take among a full release: more may be due behind it (claims.ts RELEASE_ROUNDS).
        if (raw !== undefined || released < RELEASE_LIMIT) break;
        if (round + 1 === rounds) gaveUp = due;
      }
      if (raw === undefined) return null;
      row = rowOf(raw);
    }
    // Claims are a move too: the state machine decides who may make it (states.ts).
    const verdict = checkClaim({ id: row.id, state: row.state, creator: row.creator, creatorRole: row.creator_role, assignee: row.assignee }, asAgent(input.agent));
    if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id });
    const token = randomUUID();
    const lease = input.leaseMs ?? DEFAULT_LEASE_MS;
    const leaseExpiresAt = now + lease;
    row.state = input.start === true ? 'in_progress' : 'claimed';
    row.assignee = input.agent;
    row.claim_token = token;
    row.attempts += 1;
    row.lease_ms = lease;
    row.lease_expires_at = leaseExpiresAt;
    row.stale_since = null;
    row.updated_at = now;
    const head = row.last_event_id ?? 0; // the row was read just now, in this transaction
    const claimed: TaskEvent = {
      id: 0,
      taskId: row.id,
      type: 'task.claimed',
      actor: input.agent,
      actorRole: 'agent',
      data: { from: 'pending', to: 'claimed', attempt: row.attempts, lease_expires_at: leaseExpiresAt },
      createdAt: now,
    };
    if (input.start === true) {
      const started: TaskEvent = {
        id: 0,
        taskId: row.id,
        type: 'task.transitioned',
        actor: input.agent,
        actorRole: 'agent',
        data: { from: 'claimed', to: 'in_progress' },
        createdAt: now,
      };
      row.last_event_id = writer.appendChain(row.id, [claimed, started], [claimedJson(row.attempts, leaseExpiresAt), STARTED_JSON], head);
      events.push(claimed, started);
    } else {
      row.last_event_id = writer.appendChain(row.id, [claimed], [claimedJson(row.attempts, leaseExpiresAt)], head);
      events.push(claimed);
    }
    if (input.workerId === undefined) {
      take.run(row.state, row.assignee, token, row.attempts, lease, leaseExpiresAt, now, row.last_event_id, row.id);
    } else {
      row.worker_id = input.workerId;
      takeWithWorker.run(row.state, row.assignee, token, row.attempts, lease, leaseExpiresAt, now, row.last_event_id, row.worker_id, row.id);
    }
    const task = toTask(row) as ClaimedTask;
    task.claimToken = token;
    return task;
  };
}

export function prepareHeartbeat(db: Db): Heartbeat {
  const extend = db.prepare<Record<string, unknown>, { lease_expires_at: number }>(
    `UPDATE tasks SET lease_expires_at = @now + COALESCE(@lease, lease_ms), stale_since = NULL
     WHERE id = @id AND claim_token = @token AND assignee = @agent AND state IN ('claimed', 'in_progress')
     RETURNING lease_expires_at`,
  );
  const getRow = prepareGetRow(db);
  return (input, now) => {
    const row = extend.get({ id: input.taskId, token: input.claimToken, agent: input.agent, lease: input.leaseMs ?? null, now });
    if (row !== undefined) return row.lease_expires_at;
    throw heartbeatRefusal(input.taskId, input.agent, getRow(input.taskId));
  };
}
