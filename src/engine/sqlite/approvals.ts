/** Approvals in SQLite: parking a run on one, deciding it, expiring it, using it once. */
import type { Approval, DecideInput, ParkInput } from '../approvals.js';
import { type ApprovalRow as Row, toApproval } from '../approval-rows.js';
import { asAgent, systemActor } from '../actors.js';
import { mayDecideApproval } from '../authority.js';
import { EngineError } from '../errors.js';
import type { Fence, Usage } from '../runs.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import type { ApplyMove } from './moves.js';
import { type EventWriter, type TaskRow, prepareGetRow } from './rows.js';

export interface Approvals {
  park(fence: (f: Fence) => TaskRow, f: Fence, input: ParkInput, usage: Usage, now: number, events: TaskEvent[]): Approval;
  forStep(stepId: number): Approval | undefined;
  repark(fence: (f: Fence) => TaskRow, f: Fence, approval: Approval, now: number, events: TaskEvent[]): void;
  use(fence: (f: Fence) => TaskRow, f: Fence, approvalId: number, now: number, events: TaskEvent[]): void;
  decide(input: DecideInput, now: number, events: TaskEvent[]): Approval;
  expire(now: number, events: TaskEvent[]): number[];
  revokeUnused(taskIds: number[] | 'all', now: number, events: TaskEvent[]): number;
  list(state: Approval['state'] | undefined, limit: number): Approval[];
  count(state: Approval['state']): number;
  get(id: number): Approval;
}

export function prepareApprovals(db: Db, writer: EventWriter, apply: ApplyMove): Approvals {
  const getRow = prepareGetRow(db);
  const insert = db.prepare<Record<string, unknown>, Row>(
    `INSERT INTO approvals (task_id, run_id, step_id, tool, args, fingerprint, state, created_at, expires_at)
     VALUES (@task_id, @run_id, @step_id, @tool, @args, @fingerprint, 'pending', @now, @expires_at) RETURNING *`,
  );
  const byId = db.prepare<[number], Row>('SELECT * FROM approvals WHERE id = ?');
  const countByState = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM approvals WHERE state = ?');
  const byStep = db.prepare<[number], Row>('SELECT * FROM approvals WHERE step_id = ? ORDER BY id DESC LIMIT 1');
  const setState = db.prepare('UPDATE approvals SET state = ?, reason = COALESCE(?, reason), decided_at = ?, decided_by = ?, decided_by_role = ? WHERE id = ?');
  const parkStep = db.prepare("UPDATE steps SET status = 'waiting_approval' WHERE id = ?");
  const parkRun = db.prepare("UPDATE runs SET phase = 'waiting_approval', usage = ? WHERE id = ?");
  const due = db.prepare<[number], Row>("SELECT * FROM approvals WHERE state = 'pending' AND expires_at IS NOT NULL AND expires_at <= ? ORDER BY id");
  const listAll = db.prepare<[number], Row>('SELECT * FROM approvals ORDER BY id DESC LIMIT ?');
  const listState = db.prepare<[string, number], Row>('SELECT * FROM approvals WHERE state = ? ORDER BY id DESC LIMIT ?');
  // A stop revokes what has not been used: grants, and requests still waiting for a decision.
  const unusedOf = db.prepare<[number], Row>("SELECT * FROM approvals WHERE task_id = ? AND state IN ('approved', 'pending')");
  const unusedAll = db.prepare<[], Row>("SELECT * FROM approvals WHERE state IN ('approved', 'pending')");

  const giveBackAttempt = db.prepare('UPDATE tasks SET attempts = MAX(attempts - 1, 0) WHERE id = ?');
  /** A decided or expired approval puts its waiting task back in the queue, to be resumed. */
  const requeue = (taskId: number, reason: string, now: number, events: TaskEvent[]) => {
    const task = getRow(taskId);
    if (task === undefined || task.state !== 'waiting') return;
    apply(task, { to: 'pending', actor: systemActor('approval'), reason }, now, events);
    // Waiting for a person is not a failed attempt: the claim that resumes the run must not
    // use up one of the task's max_attempts.
    giveBackAttempt.run(taskId);
  };

  const get = (id: number): Row => {
    const row = byId.get(id);
    if (row === undefined) throw new EngineError('APPROVAL_NOT_FOUND', `approval ${id} does not exist`, { approval_id: id });
    return row;
  };

  return {
    park(fence, f, input, usage, now, events) {
      const task = fence(f);
      const row = insert.get({
        task_id: f.taskId,
        run_id: input.runId,
        step_id: input.stepId,
        tool: input.tool,
        args: JSON.stringify(input.args),
        fingerprint: input.fingerprint,
        now,
        expires_at: input.expiresAt,
      })!;
      parkStep.run(input.stepId);
      parkRun.run(JSON.stringify(usage), input.runId);
      events.push(writer.append(f.taskId, 'approval.requested', asAgent(f.agent), { approval_id: row.id, run_id: input.runId, tool: input.tool, args: input.args, expires_at: input.expiresAt === null ? null : new Date(input.expiresAt).toISOString() }, now));
      events.push(writer.append(f.taskId, 'run.paused', asAgent(f.agent), { run_id: input.runId, reason: `waiting for approval ${row.id}` }, now));
      apply(task, { to: 'waiting', actor: asAgent(f.agent), reason: `approval ${row.id} of ${input.tool}` }, now, events);
      return toApproval(row);
    },
    repark(fence, f, approval, now, events) {
      const task = fence(f);
      db.prepare("UPDATE runs SET phase = 'waiting_approval' WHERE id = ?").run(approval.runId);
      events.push(writer.append(f.taskId, 'run.paused', asAgent(f.agent), { run_id: approval.runId, reason: `still waiting for approval ${approval.id}` }, now));
      apply(task, { to: 'waiting', actor: asAgent(f.agent), reason: `approval ${approval.id} of ${approval.tool}` }, now, events);
    },
    forStep(stepId) {
      const row = byStep.get(stepId);
      return row === undefined ? undefined : toApproval(row);
    },
    use(fence, f, approvalId, now, events) {
      fence(f);
      const row = get(approvalId);
      if (row.state !== 'approved') throw new EngineError('INVALID_TRANSITION', `approval ${approvalId} is ${row.state}, not approved`, { approval_id: approvalId });
      setState.run('used', null, row.decided_at, row.decided_by, row.decided_by_role, approvalId);
      events.push(writer.append(f.taskId, 'approval.used', asAgent(f.agent), { approval_id: approvalId }, now));
    },
    decide(input, now, events) {
      const row = get(input.approvalId);
      const task = getRow(row.task_id)!;
      const { actor } = input;
      // Authority first: one who may not decide it learns nothing of whether it was decided.
      const verdict = mayDecideApproval(actor, { id: task.id, creator: task.creator, creatorRole: task.creator_role, assignee: task.assignee }, row.id);
      if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { approval_id: row.id });
      if (row.state !== 'pending') throw new EngineError('INVALID_TRANSITION', `approval ${row.id} is already ${row.state}`, { approval_id: row.id });
      const state = input.approve ? 'approved' : 'rejected';
      setState.run(state, input.reason ?? null, now, actor.id, actor.role, row.id);
      events.push(writer.append(row.task_id, 'approval.decided', actor, { approval_id: row.id, decision: state, ...(input.reason === undefined ? {} : { reason: input.reason }) }, now));
      requeue(row.task_id, `approval ${row.id} ${state}`, now, events);
      return toApproval(byId.get(row.id)!);
    },
    expire(now, events) {
      const expired: number[] = [];
      for (const row of due.all(now)) {
        setState.run('expired', 'expired before a decision', now, 'approval', 'system', row.id);
        events.push(writer.append(row.task_id, 'approval.decided', systemActor('approval'), { approval_id: row.id, decision: 'expired' }, now));
        requeue(row.task_id, `approval ${row.id} expired`, now, events);
        expired.push(row.id);
      }
      return expired;
    },
    revokeUnused(taskIds, now, events) {
      const rows = taskIds === 'all' ? unusedAll.all() : taskIds.flatMap((id) => unusedOf.all(id));
      for (const row of rows) {
        setState.run('revoked', 'revoked by stop', now, 'control', 'system', row.id);
        events.push(writer.append(row.task_id, 'approval.decided', systemActor('control'), { approval_id: row.id, decision: 'revoked' }, now));
      }
      return rows.length;
    },
    list: (state, limit) => (state === undefined ? listAll.all(limit) : listState.all(state, limit)).map(toApproval),
    count: (state) => countByState.get(state)!.n,
    get: (id) => toApproval(get(id)),
  };
}
