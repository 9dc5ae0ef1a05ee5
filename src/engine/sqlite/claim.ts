/** Claims and heartbeats: the fenced lease of a task. */
import { randomUUID } from 'node:crypto';
import { EngineError } from '../errors.js';
import { asAgent } from '../actors.js';
import { checkClaim } from '../states.js';
import { checkClaimTarget } from '../claims.js';
import { heartbeatRefusal } from '../task-rows.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { DEFAULT_LEASE_MS, DEFAULT_QUEUE } from '../creation.js';
import { type EventWriter, type TaskRow, TASK_COLUMNS, prepareGetRow, rowOf, toTask } from './rows.js';

export { DEFAULT_LEASE_MS } from '../creation.js';

export type Claim = (input: ClaimInput, now: number, events: TaskEvent[]) => ClaimedTask | null;
/** Whether a claim by `input` (without a task id) would find a task now: a read, outside any transaction. */
export type Claimable = (input: ClaimInput, now: number) => boolean;
export type Heartbeat = (input: HeartbeatInput, now: number) => number;

// The events' data as JSON.stringify writes it (both numbers are safe integers).
const claimedJson = (attempt: number, leaseExpiresAt: number): string =>
  `{"from":"pending","to":"claimed","attempt":${attempt},"lease_expires_at":${leaseExpiresAt}}`;
const STARTED_JSON = '{"from":"claimed","to":"in_progress"}';

// The best claimable task is the first eligible entry of the partial index tasks_claimable,
// or for a daemon (withCard) of tasks_claimable_card, which holds only tasks with a card:
// named, so that the planner never walks past the tasks without one (migration 8).
export const pickSql = (withCard: boolean, columns = TASK_COLUMNS) =>
  `SELECT ${columns} FROM tasks${withCard ? ' INDEXED BY tasks_claimable_card' : ''}
   WHERE state = 'pending' AND unmet_deps = 0 AND queue = ? AND run_after <= ?
     AND (for_agent IS NULL OR for_agent = ?)
     AND (requires IS NULL OR NOT EXISTS (
       SELECT 1 FROM json_each(tasks.requires) AS r WHERE r.value NOT IN (SELECT value FROM json_each(?))))${withCard ? "\n     AND card <> '{}'" : ''}
   ORDER BY priority DESC, id LIMIT 1`;

const capsOf = (input: ClaimInput): string =>
  input.capabilities === undefined || input.capabilities.length === 0 ? '[]' : JSON.stringify(input.capabilities);

export function prepareClaimable(db: Db): Claimable {
  const any = db.prepare<unknown[], unknown[]>(pickSql(false, 'id')).raw(true);
  const anyWithCard = db.prepare<unknown[], unknown[]>(pickSql(true, 'id')).raw(true);
  return (input, now) => (input.withCard === true ? anyWithCard : any).get(input.queue ?? DEFAULT_QUEUE, now, input.agent, capsOf(input)) !== undefined;
}

export function prepareClaim(db: Db, writer: EventWriter): Claim {
  const pick = db.prepare<unknown[], unknown[]>(pickSql(false)).raw(true);
  const pickWithCard = db.prepare<unknown[], unknown[]>(pickSql(true)).raw(true);
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
  const takeWithWorker = db.prepare(takeSql(true));


  return (input, now, events) => {
    const caps = capsOf(input);
    let row: TaskRow;
    if (input.taskId !== undefined) {
      row = checkClaimTarget(getRow(input.taskId), input, now);
    } else {
      const raw = (input.withCard === true ? pickWithCard : pick).get(input.queue ?? DEFAULT_QUEUE, now, input.agent, caps);
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
