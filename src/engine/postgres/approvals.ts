/**
 * Approvals on PostgreSQL: parking a run on one, deciding it, expiring it, using it once.
 *
 * Concurrency, where SQLite had one writer at a time: every change of an approval's state
 * holds its task's row lock, taken before the approval's (the fence, or `lockTask` here), so
 * the decisions, expiries, uses and stops of one approval are serialized and the locks are
 * always taken in one order (task, then approval). A second decider waits for the first,
 * then reads the approval as the first left it and is refused as SQLite refuses it.
 */
import { type ApprovalRow, toApproval } from '../approval-rows.js';
import type { Approval, DecideInput, ParkInput } from '../approvals.js';
import { asAgent, systemActor } from '../actors.js';
import { mayDecideApproval } from '../authority.js';
import { EngineError } from '../errors.js';
import type { Fence, Usage } from '../runs.js';
import type { TaskRow } from '../task-rows.js';
import type { Actor, TaskEvent } from '../types.js';
import type { Query } from './connection.js';
import { fenceTask } from './fence.js';
import { appendEvent, appendEvents, applyMove, lockTask } from './moves.js';

type Row = ApprovalRow & Record<string, unknown>;

const APPROVAL = systemActor('approval');
const CONTROL = systemActor('control');

/** An event built here and written with others in one statement (appendEvents sets its id). */
const eventOf = (taskId: number, type: string, actor: Actor, data: Record<string, unknown>, at: number): TaskEvent => ({
  id: 0,
  taskId,
  type,
  actor: actor.id,
  actorRole: actor.role,
  data,
  createdAt: at,
});

const notFound = (id: number) => new EngineError('APPROVAL_NOT_FOUND', `approval ${id} does not exist`, { approval_id: id });

/** The approval, locked; the caller holds its task's lock already. */
async function lockApproval(q: Query, id: number): Promise<Row> {
  const [row] = await q<Row>('SELECT * FROM approvals WHERE id = $1 FOR UPDATE', [id]);
  if (row === undefined) throw notFound(id);
  return row;
}

/** A decided or expired approval puts its waiting task (locked by the caller) back in the queue, to be resumed. */
async function requeue(q: Query, task: TaskRow | undefined, reason: string, now: number, events: TaskEvent[]): Promise<void> {
  if (task === undefined || task.state !== 'waiting') return;
  await applyMove(q, task, { to: 'pending', actor: APPROVAL, reason }, now, events);
  // Waiting for a person is not a failed attempt: the claim that resumes the run must not
  // use up one of the task's max_attempts.
  await q('UPDATE tasks SET attempts = GREATEST(attempts - 1, 0) WHERE id = $1', [task.id]);
}

async function park(q: Query, f: Fence, input: ParkInput, usage: Usage, now: number, events: TaskEvent[]): Promise<Approval> {
  const task = await fenceTask(q, f);
  const [row] = await q<Row>(
    `INSERT INTO approvals (task_id, run_id, step_id, tool, args, fingerprint, state, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) RETURNING *`,
    [f.taskId, input.runId, input.stepId, input.tool, JSON.stringify(input.args), input.fingerprint, now, input.expiresAt],
  );
  await q("UPDATE steps SET status = 'waiting_approval' WHERE id = $1", [input.stepId]);
  await q("UPDATE runs SET phase = 'waiting_approval', usage = $1 WHERE id = $2", [JSON.stringify(usage), input.runId]);
  const agent = asAgent(f.agent);
  const written = [
    eventOf(f.taskId, 'approval.requested', agent, { approval_id: row!.id, run_id: input.runId, tool: input.tool, args: input.args, expires_at: input.expiresAt === null ? null : new Date(input.expiresAt).toISOString() }, now),
    eventOf(f.taskId, 'run.paused', agent, { run_id: input.runId, reason: `waiting for approval ${row!.id}` }, now),
  ];
  await appendEvents(q, written);
  events.push(...written);
  await applyMove(q, task, { to: 'waiting', actor: agent, reason: `approval ${row!.id} of ${input.tool}` }, now, events);
  return toApproval(row!);
}

async function repark(q: Query, f: Fence, approval: Approval, now: number, events: TaskEvent[]): Promise<void> {
  const task = await fenceTask(q, f);
  await q("UPDATE runs SET phase = 'waiting_approval' WHERE id = $1", [approval.runId]);
  events.push(await appendEvent(q, f.taskId, 'run.paused', asAgent(f.agent), { run_id: approval.runId, reason: `still waiting for approval ${approval.id}` }, now));
  await applyMove(q, task, { to: 'waiting', actor: asAgent(f.agent), reason: `approval ${approval.id} of ${approval.tool}` }, now, events);
}

async function use(q: Query, f: Fence, approvalId: number, now: number, events: TaskEvent[]): Promise<void> {
  await fenceTask(q, f);
  const row = await lockApproval(q, approvalId);
  if (row.state !== 'approved') throw new EngineError('INVALID_TRANSITION', `approval ${approvalId} is ${row.state}, not approved`, { approval_id: approvalId });
  // Only the state changes: the decision (reason, when, by whom) stays as it was.
  await q("UPDATE approvals SET state = 'used' WHERE id = $1", [approvalId]);
  events.push(await appendEvent(q, f.taskId, 'approval.used', asAgent(f.agent), { approval_id: approvalId }, now));
}

async function decide(q: Query, input: DecideInput, now: number, events: TaskEvent[]): Promise<Approval> {
  // The task first (an approval's task never changes), then the approval: the order every
  // writer of approvals takes. Under the locks the approval is read as the last decider left it.
  const [found] = await q<{ task_id: number }>('SELECT task_id FROM approvals WHERE id = $1', [input.approvalId]);
  if (found === undefined) throw notFound(input.approvalId);
  const task = (await lockTask(q, found.task_id))!;
  const row = await lockApproval(q, input.approvalId);
  const { actor } = input;
  // Authority first: one who may not decide it learns nothing of whether it was decided.
  const verdict = mayDecideApproval(actor, { id: task.id, creator: task.creator, creatorRole: task.creator_role, assignee: task.assignee }, row.id);
  if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { approval_id: row.id });
  if (row.state !== 'pending') throw new EngineError('INVALID_TRANSITION', `approval ${row.id} is already ${row.state}`, { approval_id: row.id });
  const state = input.approve ? 'approved' : 'rejected';
  const [decided] = await q<Row>(
    'UPDATE approvals SET state = $1, reason = COALESCE($2, reason), decided_at = $3, decided_by = $4, decided_by_role = $5 WHERE id = $6 RETURNING *',
    [state, input.reason ?? null, now, actor.id, actor.role, row.id],
  );
  events.push(await appendEvent(q, row.task_id, 'approval.decided', actor, { approval_id: row.id, decision: state, ...(input.reason === undefined ? {} : { reason: input.reason }) }, now));
  await requeue(q, task, `approval ${row.id} ${state}`, now, events);
  return toApproval(decided!);
}

async function expire(q: Query, now: number, events: TaskEvent[]): Promise<number[]> {
  // Candidates without locks, then each one under its task's lock, by task (the order the
  // stop of every task locks them in too): a decision that committed meanwhile wins, and the
  // conditional UPDATE, which reads the approval as that decision left it, skips it.
  const due = await q<Row>(
    "SELECT * FROM approvals WHERE state = 'pending' AND expires_at IS NOT NULL AND expires_at <= $1 ORDER BY task_id, id",
    [now],
  );
  const expired: number[] = [];
  for (const candidate of due) {
    const task = await lockTask(q, candidate.task_id);
    const [row] = await q<Row>(
      `UPDATE approvals SET state = 'expired', reason = 'expired before a decision', decided_at = $1, decided_by = 'approval', decided_by_role = 'system'
       WHERE id = $2 AND state = 'pending' RETURNING *`,
      [now, candidate.id],
    );
    if (row === undefined) continue;
    events.push(await appendEvent(q, row.task_id, 'approval.decided', APPROVAL, { approval_id: row.id, decision: 'expired' }, now));
    await requeue(q, task, `approval ${row.id} expired`, now, events);
    expired.push(row.id);
  }
  return expired.sort((a, b) => a - b);
}

/**
 * A stop revokes what has not been used: grants, and requests still waiting for a decision.
 * One conditional UPDATE: a decision racing it either committed first (and its grant is
 * revoked, or its refusal left alone) or waits for the stop and finds the approval revoked.
 */
async function revokeUnused(q: Query, taskIds: number[] | 'all', now: number, events: TaskEvent[]): Promise<number> {
  const set = `UPDATE approvals SET state = 'revoked', reason = 'revoked by stop', decided_at = $1, decided_by = 'control', decided_by_role = 'system'
     WHERE state IN ('approved', 'pending')`;
  const rows = taskIds === 'all'
    ? await q<Row>(`${set} RETURNING *`, [now])
    : taskIds.length === 0 ? [] : await q<Row>(`${set} AND task_id = ANY($2::bigint[]) RETURNING *`, [now, taskIds]);
  // Events in SQLite's order: by the stop's task order, then by approval.
  const order = taskIds === 'all' ? undefined : new Map(taskIds.map((id, i) => [id, i]));
  rows.sort((a, b) => (order === undefined ? 0 : order.get(a.task_id)! - order.get(b.task_id)!) || a.id - b.id);
  const written = rows.map((row) => eventOf(row.task_id, 'approval.decided', CONTROL, { approval_id: row.id, decision: 'revoked' }, now));
  await appendEvents(q, written);
  events.push(...written);
  return rows.length;
}

export const pgApprovals = {
  park,
  repark,
  use,
  decide,
  expire,
  revokeUnused,
  async forStep(q: Query, stepId: number): Promise<Approval | undefined> {
    const [row] = await q<Row>('SELECT * FROM approvals WHERE step_id = $1 ORDER BY id DESC LIMIT 1', [stepId]);
    return row === undefined ? undefined : toApproval(row);
  },
  async list(q: Query, state: Approval['state'] | undefined, limit: number): Promise<Approval[]> {
    const rows = state === undefined
      ? await q<Row>('SELECT * FROM approvals ORDER BY id DESC LIMIT $1', [limit])
      : await q<Row>('SELECT * FROM approvals WHERE state = $1 ORDER BY id DESC LIMIT $2', [state, limit]);
    return rows.map(toApproval);
  },
  async count(q: Query, state: Approval['state']): Promise<number> {
    return (await q<{ n: number }>('SELECT count(*) AS n FROM approvals WHERE state = $1', [state]))[0]!.n;
  },
  async get(q: Query, id: number): Promise<Approval> {
    const [row] = await q<Row>('SELECT * FROM approvals WHERE id = $1', [id]);
    if (row === undefined) throw notFound(id);
    return toApproval(row);
  },
};
