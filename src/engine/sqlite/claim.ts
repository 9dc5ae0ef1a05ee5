/** Claims and heartbeats: the fenced lease of a task. */
import { randomUUID } from 'node:crypto';
import { EngineError } from '../errors.js';
import { isFenced } from '../states.js';
import type { ClaimInput, ClaimedTask, HeartbeatInput, TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { DEFAULT_QUEUE } from './create.js';
import { type EventWriter, type TaskRow, toTask } from './rows.js';

export const DEFAULT_LEASE_MS = 30_000;

export type Claim = (input: ClaimInput, now: number, events: TaskEvent[]) => ClaimedTask | null;
export type Heartbeat = (input: HeartbeatInput, now: number) => number;

const ELIGIBLE = `
  (for_agent IS NULL OR for_agent = @agent)
  AND (requires IS NULL OR NOT EXISTS (
    SELECT 1 FROM json_each(tasks.requires) AS r WHERE r.value NOT IN (SELECT value FROM json_each(@caps))))`;

export function prepareClaim(db: Db, writer: EventWriter): Claim {
  // Served by the partial index tasks_claimable: the first eligible entry wins.
  const pick = db.prepare<Record<string, unknown>, { id: number }>(
    `SELECT id FROM tasks
     WHERE state = 'pending' AND unmet_deps = 0 AND queue = @queue AND run_after <= @now AND ${ELIGIBLE}
     ORDER BY priority DESC, id LIMIT 1`,
  );
  const eligible = db.prepare<Record<string, unknown>, { ok: number }>(
    `SELECT 1 AS ok FROM tasks WHERE id = @id AND ${ELIGIBLE}`,
  );
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  const take = db.prepare<Record<string, unknown>, TaskRow>(
    `UPDATE tasks SET state = @state, assignee = @agent, claim_token = @token, worker_id = @worker,
       attempts = attempts + 1, lease_ms = @lease, lease_expires_at = @now + @lease, stale_since = NULL,
       updated_at = @now
     WHERE id = @id AND state = 'pending' RETURNING *`,
  );

  function checkTarget(input: ClaimInput, id: number, caps: string, now: number): void {
    const row = getRow.get(id);
    if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
    if (row.state !== 'pending') {
      throw new EngineError('INVALID_TRANSITION', `task ${id} is ${row.state}; only a pending task can be claimed`, { task_id: id });
    }
    if (eligible.get({ id, agent: input.agent, caps }) === undefined) {
      const need = row.for_agent !== null && row.for_agent !== input.agent ? `agent ${row.for_agent}` : `capabilities ${row.requires}`;
      throw new EngineError('FORBIDDEN', `task ${id} is reserved for ${need}; ${input.agent} may not claim it`, { task_id: id });
    }
    if (row.unmet_deps > 0) {
      throw new EngineError('INVALID_TRANSITION', `task ${id} waits for ${row.unmet_deps} unfinished dependencies`, { task_id: id });
    }
    if (row.run_after > now) {
      throw new EngineError('INVALID_TRANSITION', `task ${id} may not run before ${new Date(row.run_after).toISOString()}`, { task_id: id });
    }
  }

  return (input, now, events) => {
    const caps = JSON.stringify(input.capabilities ?? []);
    let id: number | undefined;
    if (input.taskId !== undefined) {
      checkTarget(input, input.taskId, caps, now);
      id = input.taskId;
    } else {
      id = pick.get({ queue: input.queue ?? DEFAULT_QUEUE, now, agent: input.agent, caps })?.id;
      if (id === undefined) return null;
    }
    const token = randomUUID();
    const row = take.get({
      id,
      state: input.start === true ? 'in_progress' : 'claimed',
      agent: input.agent,
      token,
      worker: input.workerId ?? null,
      lease: input.leaseMs ?? DEFAULT_LEASE_MS,
      now,
    })!;
    events.push(
      writer.append(id, 'task.claimed', input.agent, {
        from: 'pending',
        to: 'claimed',
        attempt: row.attempts,
        lease_expires_at: row.lease_expires_at,
      }, now),
    );
    if (input.start === true) {
      events.push(writer.append(id, 'task.transitioned', input.agent, { from: 'claimed', to: 'in_progress' }, now));
    }
    return { ...toTask(row), claimToken: token };
  };
}

export function prepareHeartbeat(db: Db): Heartbeat {
  const extend = db.prepare<Record<string, unknown>, { lease_expires_at: number }>(
    `UPDATE tasks SET lease_expires_at = @now + COALESCE(@lease, lease_ms), stale_since = NULL
     WHERE id = @id AND claim_token = @token AND assignee = @agent AND state IN ('claimed', 'in_progress')
     RETURNING lease_expires_at`,
  );
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');
  return (input, now) => {
    const row = extend.get({ id: input.taskId, token: input.claimToken, agent: input.agent, lease: input.leaseMs ?? null, now });
    if (row !== undefined) return row.lease_expires_at;
    const task = getRow.get(input.taskId);
    if (task === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
    if (!isFenced(task.state)) {
      throw new EngineError('INVALID_TRANSITION', `task ${input.taskId} is ${task.state} and holds no lease to extend`, { task_id: input.taskId });
    }
    throw new EngineError(
      'STALE_CLAIM',
      `task ${input.taskId}: claim token of ${input.agent} is not current; the task was reclaimed`,
      { task_id: input.taskId },
    );
  };
}
