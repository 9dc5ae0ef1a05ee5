/**
 * A claimer's move of its own task in one round trip on PostgreSQL.
 *
 * A move is otherwise two round trips (tasks.ts transition): BEGIN with the row locked and
 * read, then the checked write with the COMMIT. But a claimer that moves its task knows what
 * the row held when it claimed it (or last moved it): its store remembers the row a claim of
 * the next task left (claim.ts claimOne; a claim by id is not remembered, and its moves take
 * the full path), and each move's row after it. The moves are checked against that
 * row by the same rules (stageMove, checkStepActor), and written by one statement that writes
 * only if the row still holds exactly the columns the check read. That statement goes with
 * BEGIN, the row's lock and the COMMIT in one write to the socket (transaction.ts oneTrip).
 *
 * If the row changed meanwhile (another process moved it, the sweep took it back, an
 * operator cancelled it), or the rules refuse the move on the row as remembered, nothing is
 * written and the move takes the full path, which reads the row as it is: the same rules and
 * the same refusals, one round trip more. Moves that end a task other than by completing it
 * (a run to close, dependents to cancel) always take the full path.
 *
 * The lock is a statement of its own so that the write's snapshot is taken after it: a task
 * created meanwhile that depends on this one holds this row FOR SHARE until it commits, and
 * the completion's count-down of its dependents must see it (one statement waiting for the
 * lock would count down from a snapshot taken before it waited).
 */
import { isTerminal } from '../states.js';
import { type TaskRow, checkStepActor, stageMove, toTask } from '../task-rows.js';
import type { ActorRole, Task, TaskEvent, TaskState, TransitionInput } from '../types.js';
import { workWakeOf } from '../claims.js';
import { NOW_MS, type PgConnection } from './connection.js';
import { WAKE, countDownDependents } from './moves.js';
import { workChannels } from './watch.js';

/** The columns of a claimed row a move's check reads (and the statement compares). */
export interface SeenClaim {
  id: number;
  state: TaskState;
  creator: string;
  creator_role: ActorRole;
  assignee: string | null;
  claim_token: string;
  worker_id: string | null;
  lease_ms: number | null;
}

/** The rows this store's claimers last saw of their claims, by claim token (a bounded memory). */
export interface SeenClaims {
  get(token: string): SeenClaim | undefined;
  /** Keeps the row a claim or a move left (forgets it when the row holds no claim any more). */
  remember(row: TaskRow, token: string): void;
  forget(token: string): void;
}

/** Claims remembered at most: past it the oldest is forgotten (its next move takes the full path). */
export const MAX_SEEN = 10_000;

export function seenClaims(max = MAX_SEEN): SeenClaims {
  const seen = new Map<string, SeenClaim>();
  return {
    get: (token) => seen.get(token),
    remember(row, token) {
      seen.delete(token);
      if (row.claim_token !== token) return;
      const { id, state, creator, creator_role, assignee, worker_id, lease_ms } = row;
      seen.set(token, { id, state, creator, creator_role, assignee, claim_token: token, worker_id, lease_ms });
      if (seen.size > max) seen.delete(seen.keys().next().value!);
    },
    forget: (token) => void seen.delete(token),
  };
}

// The columns of the row a move's check does not read: never written by the statement below.
const UNREAD = {
  title: '', priority: 0, attempts: 0, max_attempts: 0, queue: '', for_agent: null, requires: null, depends_on: null,
  idempotency_key: null, run_after: 0, unmet_deps: 0, lease_expires_at: null, stale_since: null, created_at: 0,
  updated_at: 0, card: '{}', result: null, last_event_id: null,
} satisfies Omit<TaskRow, keyof SeenClaim>;

// `c.locked`: this transaction holds the row's lock (taking it assigned a transaction id). A
// BEGIN that failed alone would leave the lock and this statement to run each on its own,
// the move's snapshot no longer after the lock: it then writes nothing.
const MOVE = `WITH c AS (SELECT coalesce($1::bigint, ${NOW_MS}) AS now, pg_catalog.txid_current_if_assigned() IS NOT NULL AS locked),
  u AS (UPDATE tasks t SET state = $3, assignee = $4, claim_token = $5, worker_id = $6, lease_expires_at = c.now + $7::bigint,
      stale_since = NULL, updated_at = c.now, result = CASE WHEN $8::boolean THEN $9::text ELSE t.result END
    FROM c
    WHERE c.locked AND t.id = $2 AND t.state = $10 AND t.creator = $11 AND t.creator_role = $12 AND t.assignee IS NOT DISTINCT FROM $13
      AND t.claim_token = $14 AND t.worker_id IS NOT DISTINCT FROM $15 AND t.lease_ms IS NOT DISTINCT FROM $16::bigint
    RETURNING t.*),
  e AS (INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at)
    SELECT u.id, x.type, x.actor, x.role, x.data, u.updated_at
    FROM u CROSS JOIN ROWS FROM (pg_catalog.unnest($17::text[]), pg_catalog.unnest($18::text[]), pg_catalog.unnest($19::text[]), pg_catalog.unnest($20::text[]))
      WITH ORDINALITY x(type, actor, role, data, n)
    ORDER BY x.n RETURNING id),
  d AS (${countDownDependents('$2')} AND $21::boolean AND EXISTS (SELECT 1 FROM u) RETURNING 1)
  SELECT u.*, (SELECT pg_catalog.array_agg(id ORDER BY id) FROM e) AS event_ids,
    (SELECT pg_catalog.count(pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema(), ch), '')) FROM pg_catalog.unnest($22::text[]) ch) AS woke,
    ${WAKE('d')} AS woke_deps
  FROM u`;

/**
 * Moves the task in one round trip if its row is still `seen`; null when it is not (or the
 * rules refuse the move on `seen`), having written nothing: the caller takes the full path.
 */
export async function moveOne(
  conn: PgConnection,
  input: TransitionInput,
  seen: SeenClaim,
  fixedNow: number | undefined,
): Promise<{ task: Task; row: TaskRow; events: TaskEvent[] } | null> {
  if (seen.id !== input.taskId) return null;
  const steps = [{ to: input.to, actor: input.actor, reason: input.reason, result: input.result }, ...(input.then ?? [])];
  let row: TaskRow = { ...UNREAD, ...seen };
  const events: TaskEvent[] = [];
  try {
    // Staged at time 0: the statement adds the database's clock to the lease it leaves.
    for (const step of steps) {
      checkStepActor(row, input.claimToken, step.actor);
      const { next, event } = stageMove(row, step, 0);
      events.push(event);
      row = next;
    }
  } catch {
    return null; // refused on the row as remembered: the full path refuses (or not) on the row as it is
  }
  if (row.state !== 'completed' && isTerminal(row.state)) return null;
  // A move back to pending clears the result (movedRow): written like a given one.
  const withResult = steps.some((s) => s.result !== undefined) || row.state === 'pending';
  const [, rows] = await conn.oneTrip('transition', [
    { text: 'SELECT 1 FROM tasks WHERE id = $1 FOR UPDATE', params: [seen.id] },
    {
      text: MOVE,
      params: [
        fixedNow ?? null, seen.id, row.state, row.assignee, row.claim_token, row.worker_id, row.lease_expires_at, withResult, withResult ? row.result : null,
        seen.state, seen.creator, seen.creator_role, seen.assignee, seen.claim_token, seen.worker_id, seen.lease_ms,
        events.map((e) => e.type), events.map((e) => e.actor), events.map((e) => e.actorRole), events.map((e) => JSON.stringify(e.data)),
        row.state === 'completed', workChannels(workWakeOf(events)),
      ],
    },
  ]);
  const written = rows?.[0] as (TaskRow & { event_ids: unknown[]; woke: unknown; woke_deps: unknown }) | undefined;
  if (written === undefined) return null;
  const { event_ids: eventIds, woke: _woke, woke_deps: _deps, ...columns } = written;
  const ids = eventIds.map(Number);
  events.forEach((e, i) => {
    e.id = ids[i]!;
    e.createdAt = columns.updated_at;
  });
  return { task: toTask(columns), row: columns, events };
}
