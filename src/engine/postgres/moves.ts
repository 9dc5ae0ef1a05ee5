/**
 * Applying a move on PostgreSQL: the state machine's check (stageMove, shared with SQLite),
 * the row update, its events, and what the move means for dependents and for an open run.
 * Every move of a task's state after its claim passes here, inside the caller's transaction,
 * on a row the caller locked (`lockTask`): a move the state machine refuses throws, and the
 * transaction rolls back whole.
 */
import { appendAll } from '../append-all.js';
import { systemActor } from '../actors.js';
import { isTerminal } from '../states.js';
import { ABANDONED_READ_ERROR, ABANDONED_WRITE_ERROR, type ActionRow, abandonedRunEnvelope, abandonedSettles, abandonedSideEffects } from '../abandoned-run.js';
import { type MoveSpec, SUMMARY_COLUMNS, type TaskRow, reclaimSpec, stageMove } from '../task-rows.js';
import type { Actor, TaskEvent } from '../types.js';
import type { Opening, Query } from './connection.js';
import { hold } from './transaction.js';
import { NOTIFY_CONTROLS } from './watch.js';

const SYSTEM = systemActor('system');

/**
 * A write that knows its task up front locks the row in the transaction's first round trip,
 * with BEGIN (PgTaskStore.write's `lock`): `whole` the row, or only its claim for a step's
 * fence (the card can be large). None for an id that is not a safe positive integer.
 */
export function lockOpening(id: number, whole: boolean): Opening | undefined {
  if (!Number.isSafeInteger(id) || id < 1) return undefined;
  return whole
    ? { name: 'taskloop_lock_row', sql: 'SELECT * FROM tasks WHERE id = $1 FOR UPDATE', types: ['bigint'], args: [id] }
    : { name: 'taskloop_lock_claim', sql: 'SELECT id, state, claim_token FROM tasks WHERE id = $1 FOR UPDATE', types: ['bigint'], args: [id] };
}

// The row an opening locked, until the body first asks for it: a second ask reads again, and
// sees what this transaction wrote since.
const primed = new WeakMap<Query, { id: number; whole: boolean; row: Record<string, unknown> | undefined }>();

/** Keeps the row `lockOpening` returned for the body's first `lockTask` or fence. */
export function primeLock(q: Query, id: number, whole: boolean, row: Record<string, unknown> | undefined): void {
  primed.set(q, { id, whole, row });
}

/** The primed row of task `id` (taken once), when the opening locked it with the columns asked for. */
export function takePrimed(q: Query, id: number, whole: boolean): { row: Record<string, unknown> | undefined } | undefined {
  const p = primed.get(q);
  if (p === undefined || p.id !== id || (whole && !p.whole)) return undefined;
  primed.delete(q);
  return p;
}

/** The task's row, locked for this transaction; undefined when there is no such task. */
export async function lockTask(q: Query, id: number): Promise<TaskRow | undefined> {
  const p = takePrimed(q, id, true);
  if (p !== undefined) return p.row as TaskRow | undefined;
  return (await q<TaskRow & Record<string, unknown>>('SELECT * FROM tasks WHERE id = $1 FOR UPDATE', [id]))[0];
}

// Events a transaction appended, written with one INSERT just before its commit (a round
// trip per event was a third of a loop step's round trips). Their ids are set then, so
// nothing inside the transaction may depend on an event's id.
const deferred = new WeakMap<Query, TaskEvent[]>();

/** From now on `q`'s transaction appends its events at `flushEvents` (PgTaskStore.write does this). */
export function deferEvents(q: Query): void {
  deferred.set(q, []);
}

/** Whether `q`'s transaction holds back events not written yet (their ids would come later). */
export const holdsEvents = (q: Query): boolean => (deferred.get(q)?.length ?? 0) > 0;

/**
 * Writes the events `q`'s transaction appended, in order, and sets their ids: the last
 * thousand in the commit's round trip (connection.ts hold), once nothing else is written.
 */
export async function flushEvents(q: Query): Promise<void> {
  const events = deferred.get(q);
  if (events === undefined || events.length === 0) return;
  deferred.set(q, []);
  for (let at = 0; at < events.length; at += 1000) await holdEvents(q, events.slice(at, at + 1000));
}

/** Appends events in order, and sets their ids (at once, or at the transaction's flushEvents). */
export async function appendEvents(q: Query, events: TaskEvent[]): Promise<void> {
  if (events.length === 0) return;
  const later = deferred.get(q);
  if (later !== undefined) {
    appendAll(later, events);
    return;
  }
  for (let at = 0; at < events.length; at += 1000) await holdEvents(q, events.slice(at, at + 1000));
}

/** A write whose rows are not needed, run in one statement with others (`writeWithEvents`). */
export interface Write {
  sql: string;
  params: unknown[];
  /**
   * A write that may make tasks claimable (a completion's dependents): when it writes a
   * row, the statement itself calls pg_notify, so the commit wakes the claimers (watch.ts).
   */
  wakes?: boolean;
}

// Run by a statement whose write `w` wrote a row: the commit then wakes the claimers. Every
// name is pg_catalog's, though `public` is off the search path (connection.ts): a look-alike
// (an operator `||` on text and name, say) must not run as taskloop's role whatever the path.
export const WAKE = (w: string): string =>
  `(SELECT pg_catalog.count(pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema()), '')) FROM (SELECT 1 FROM ${w} LIMIT 1) x)`;

/**
 * Runs `writes` in one statement with the events the transaction has waiting, held for the
 * commit's round trip: one round trip where there were one per write, one for the events and
 * one for the COMMIT. The writes must touch different rows (a statement's data-modifying
 * parts all see one snapshot) and their text is ours: each `$n` is renumbered.
 */
export async function writeWithEvents(q: Query, writes: Write[]): Promise<void> {
  const events = deferred.get(q);
  if (events === undefined || events.length === 0 || events.length > 1000) {
    if (events !== undefined) await flushEvents(q);
    for (const w of writes) {
      if (w.wakes !== true) await q(w.sql, w.params);
      else await q(`WITH w AS (${w.sql} RETURNING 1) SELECT ${WAKE('w')} AS woke`, w.params);
    }
    return;
  }
  deferred.set(q, []);
  await holdEvents(q, events, writes);
}

/** Inserts `events` (and `writes`, in the same statement), held for the commit; their ids are set then. */
async function holdEvents(q: Query, events: TaskEvent[], writes: Write[] = []): Promise<void> {
  const values: string[] = [];
  const params: unknown[] = [];
  const ctes = writes.map((w, i) => {
    const from = params.length;
    params.push(...w.params);
    const sql = w.sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + from}`);
    return `w${i} AS (${sql}${w.wakes === true ? ' RETURNING 1' : ''})`;
  });
  const wakes = writes.map((w, i) => (w.wakes === true ? `, ${WAKE(`w${i}`)} AS woke${i}` : '')).join('');
  for (const e of events) {
    const n = params.length;
    values.push(`($${n + 1}, $${n + 2}, $${n + 3}, $${n + 4}, $${n + 5}, $${n + 6})`);
    params.push(e.taskId, e.type, e.actor, e.actorRole, JSON.stringify(e.data), e.createdAt);
  }
  await hold(q, {
    text: `${ctes.length > 0 ? `WITH ${ctes.join(', ')} ` : ''}INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at) VALUES ${values.join(', ')} RETURNING id${wakes}`,
    params,
    done: (rows) => {
      // Ids are taken row by row, in order: the ascending ids are the events' in order.
      const ids = rows.map((r) => r.id as number).sort((a, b) => a - b);
      events.forEach((e, i) => (e.id = ids[i]!));
    },
  });
}

/** One event outside a task's own moves (run.*, breaker.* …), written now. */
export async function appendEvent(q: Query, taskId: number | null, type: string, actor: Actor, data: Record<string, unknown>, at: number): Promise<TaskEvent> {
  const event: TaskEvent = { id: 0, taskId, type, actor: actor.id, actorRole: actor.role, data, createdAt: at };
  await appendEvents(q, [event]);
  return event;
}

/** A completion's dependents, each with one unmet dependency fewer: the task id is `task` (a parameter). */
export const countDownDependents = (task: string): string =>
  `UPDATE tasks SET unmet_deps = unmet_deps - 1 WHERE id IN (SELECT task_id FROM task_deps WHERE depends_on = ${task})`;

/** Writes the row a move (or several staged moves, the last one's row) left, with their events. */
export async function commitMoves(q: Query, row: TaskRow, staged: TaskEvent[], now: number, events: TaskEvent[]): Promise<TaskRow> {
  await appendEvents(q, staged);
  // last_event_id is SQLite's event chain; PostgreSQL reads a task's events by index and
  // leaves it unset (the events' ids are known only at the commit, see deferEvents).
  const writes: Write[] = [
    {
      sql: `UPDATE tasks SET state = $1, assignee = $2, claim_token = $3, worker_id = $4, lease_expires_at = $5, stale_since = NULL,
       updated_at = $6, result = $7 WHERE id = $8`,
      params: [row.state, row.assignee, row.claim_token, row.worker_id, row.lease_expires_at, now, row.result, row.id],
    },
  ];
  // Other rows than the task's own: a task never depends on itself (creation refuses it).
  if (row.state === 'completed') {
    writes.push({ sql: countDownDependents('$1'), params: [row.id], wakes: true });
  }
  await writeWithEvents(q, writes);
  if (row.state !== 'completed' && isTerminal(row.state)) {
    await closeOpenRun(q, row, now, events);
    await cancelDependents(q, row, now, events);
  }
  return row;
}

const OPEN = "state NOT IN ('completed', 'failed', 'cancelled')";
/**
 * Every task still open that depends on one of `$1`, directly or through other open tasks,
 * locked in id order (the dependency its cancel names is found in JS, from its `depends_on`:
 * a join back to the walk's rows, with hash joins off, read them all again for each task).
 * - The walk keeps each task once (UNION on the id alone) and goes on only through open
 *   tasks: keeping (task, dependency) pairs cost in-degree × out-degree a task on a dense
 *   graph (8,000 tasks in 100-wide layers: 17 s), and a subgraph cancelled before is dead.
 * - One index probe per task reached: each LATERAL with OFFSET 0 is planned on its own, in
 *   this order (task_deps by the dependency, then the task by id), so the planner cannot
 *   hash or scan whole tables at every step, and the caller turns sequential scans, hash and merge
 *   joins off around it (PLAN_BY_INDEX): statistics an agent shapes (one task with 100,000
 *   dependents, once analysed) made the planner scan all of task_deps, or all of tasks, at
 *   every step, for every cascade in the schema (an operator's 1,000-task chain: 45 ms →
 *   4.3 s; with sequential scans alone off, a full index scan each step instead).
 * - Rows without their card and result (SUMMARY_COLUMNS): `t.*` held every doomed card in
 *   memory at once.
 * A row is re-checked when locked, so one a concurrent write just ended is left out.
 */
export const DOOMED = `WITH RECURSIVE doomed (doomed_id) AS (
    SELECT d.task_id FROM task_deps d JOIN tasks t ON t.id = d.task_id WHERE d.depends_on = ANY($1::bigint[]) AND t.${OPEN}
    UNION
    SELECT n.task_id FROM doomed
      CROSS JOIN LATERAL (SELECT d.task_id FROM task_deps d WHERE d.depends_on = doomed.doomed_id OFFSET 0) n
      CROSS JOIN LATERAL (SELECT 1 FROM tasks t WHERE t.id = n.task_id AND t.${OPEN} OFFSET 0) o
  )
  SELECT ${SUMMARY_COLUMNS} FROM doomed x JOIN tasks t ON t.id = x.doomed_id
  WHERE t.${OPEN} ORDER BY t.id FOR UPDATE OF t`;

/** Sequential scans, hash and merge joins off (or back on) for the rest of the transaction, as SET LOCAL. */
const PLAN_BY_INDEX = (v: 'on' | 'off') =>
  `SELECT set_config('enable_seqscan', '${v}', true), set_config('enable_hashjoin', '${v}', true), set_config('enable_mergejoin', '${v}', true)`;

/** How many rows one UPDATE of a cascade writes. */
const CASCADE_CHUNK = 5000;

/**
 * A dependency that can never complete: its dependents can never run, so they are cancelled
 * now, and theirs in turn, rather than left pending forever. One statement finds and locks
 * them all and one writes them (per CASCADE_CHUNK), each move still checked by the state
 * machine with its own event. Cancelling them one by one recursed through a chain any agent
 * can build, at three round trips a task: 3,000 links took seconds inside the transaction.
 *
 * Then the walk runs again from everything it cancelled, until it finds nothing. Its first
 * statement reads task_deps as of the statement's start, and its locks wait for creates that
 * hold a dependency (FOR SHARE) to commit: a task such a create hung on one of them committed
 * after that start and was never seen, left pending behind a cancelled dependency for good (a
 * hostile review's race: 1,050 tasks in 30 s of four processes). The next statement sees every
 * create that committed before the locks were taken; a create after them waits for this
 * transaction and then finds its dependency cancelled, and is refused.
 */
async function cancelDependents(q: Query, root: TaskRow, now: number, events: TaskEvent[]): Promise<void> {
  // Most tasks have no dependents: one probe, as the walk alone was.
  if ((await q('SELECT 1 FROM task_deps WHERE depends_on = $1 LIMIT 1', [root.id])).length === 0) return;
  const ended: number[] = [root.id];
  await q(PLAN_BY_INDEX('off'));
  for (;;) {
    const doomed = await q<TaskRow & Record<string, unknown>>(DOOMED, [ended]);
    if (doomed.length === 0) break;
    for (const dep of doomed) ended.push(dep.id);
    await cancelAll(q, doomed, root, new Set(ended), now, events);
  }
  await q(PLAN_BY_INDEX('on'));
}

/** Cancels the locked `doomed` rows, each with its own event naming its dependency. */
async function cancelAll(q: Query, doomed: TaskRow[], root: TaskRow, ending: ReadonlySet<number>, now: number, events: TaskEvent[]): Promise<void> {
  const moved: TaskRow[] = [];
  const staged: TaskEvent[] = [];
  for (const dep of doomed) {
    // The task whose end started the cascade where it depends on it directly, else the lowest
    // of its dependencies this cascade ends.
    const deps = JSON.parse(dep.depends_on ?? '[]') as number[];
    const via = deps.includes(root.id) ? root.id : Math.min(...deps.filter((d) => ending.has(d)));
    const reason = `dependency ${via} ended ${via === root.id ? root.state : 'cancelled'}`;
    const { next, event } = stageMove(dep, { to: 'cancelled', actor: SYSTEM, reason }, now);
    moved.push(next);
    staged.push(event);
  }
  appendAll(events, staged);
  await appendEvents(q, staged);
  for (let at = 0; at < moved.length; at += CASCADE_CHUNK) {
    const part = moved.slice(at, at + CASCADE_CHUNK);
    const column = <K extends keyof TaskRow>(k: K) => part.map((r) => r[k]);
    await q(
      `UPDATE tasks t SET state = v.state, assignee = v.assignee, claim_token = v.claim_token, worker_id = v.worker_id,
         lease_expires_at = v.lease_expires_at, stale_since = NULL, updated_at = $1
       FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[])
         AS v (id, state, assignee, claim_token, worker_id, lease_expires_at)
       WHERE t.id = v.id`,
      [now, column('id'), column('state'), column('assignee'), column('claim_token'), column('worker_id'), column('lease_expires_at')],
    );
  }
  // A dependent of a task that never completed was never claimable, so it has no run; were
  // one open all the same, it is ended as any other task's that fails or is cancelled.
  for (let i = 0; i < doomed.length; i++) if (doomed[i]!.state !== 'pending') await closeOpenRun(q, moved[i]!, now, events);
}

/** One move of a locked row: checked, written, and followed through. Returns the new row. */
export async function applyMove(q: Query, row: TaskRow, spec: MoveSpec, now: number, events: TaskEvent[]): Promise<TaskRow> {
  const { next, event } = stageMove(row, spec, now);
  events.push(event);
  return commitMoves(q, next, [event], now, events);
}

/** Takes a task away from a claim that is gone (lease ran out, daemon died); returns where it went. */
export async function reclaimTask(q: Query, row: TaskRow, reason: string, now: number, events: TaskEvent[]): Promise<'pending' | 'failed'> {
  const spec = reclaimSpec(row, reason);
  await applyMove(q, row, spec, now, events);
  return spec.to as 'pending' | 'failed';
}

/**
 * A task that fails or is cancelled outside its run must not leave that run open: it is
 * ended here with an envelope that says so, and a stop is recorded so a loop still running
 * aborts its tool call at once (its next fenced write would be refused anyway).
 */
async function closeOpenRun(q: Query, row: TaskRow, now: number, events: TaskEvent[]): Promise<void> {
  const [run] = await q<{ id: number; usage: string; checkpoint_version: number }>(
    'SELECT id, usage, checkpoint_version FROM runs WHERE task_id = $1 AND finished_at IS NULL FOR UPDATE',
    [row.id],
  );
  if (run === undefined) return;
  const steps = (JSON.parse(run.usage) as { steps?: number }).steps ?? 0;
  const actions = await q<ActionRow>("SELECT seq, tool, args, status, result FROM steps WHERE run_id = $1 AND kind = 'action' ORDER BY seq", [run.id]);
  // The run's intents (abandoned-run.ts), through task_events_by_task.
  const intents = await q<{ seq: number }>(
    "SELECT (data::jsonb ->> 'seq')::integer AS seq FROM task_events WHERE task_id = $1 AND type = 'run.step_started' AND (data::jsonb ->> 'run_id')::bigint = $2 AND (data::jsonb ->> 'intent') = 'true'",
    [row.id, run.id],
  );
  const intentSeqs = new Set(intents.map((i) => i.seq));
  const effects = abandonedSideEffects(actions, intentSeqs);
  const settles = abandonedSettles(actions, intentSeqs);
  for (const [status, error, seqs] of [['unknown', ABANDONED_WRITE_ERROR, settles.unknown], ['abandoned', ABANDONED_READ_ERROR, settles.abandoned]] as const) {
    if (seqs.length > 0) await q("UPDATE steps SET status = $1, error = $2, finished_at = $3 WHERE run_id = $4 AND seq = ANY($5::integer[]) AND status = 'started'", [status, error, now, run.id, seqs]);
  }
  const envelope = abandonedRunEnvelope(run.id, row, steps, run.checkpoint_version, effects);
  await q('UPDATE runs SET phase = $1, stop_reason = $2, envelope = $3, finished_at = $4 WHERE id = $5', [
    envelope.phase,
    envelope.stop_reason,
    JSON.stringify(envelope),
    now,
    run.id,
  ]);
  await q(
    `INSERT INTO controls (task_id, state, reason, updated_at) VALUES ($1, 'stopped', $2, $3)
     ON CONFLICT (task_id) DO UPDATE SET state = 'stopped', reason = excluded.reason, updated_at = excluded.updated_at`,
    [row.id, envelope.stop_reason, now],
  );
  await q(NOTIFY_CONTROLS); // a loop still running this run hears of the stop at once
  events.push(await appendEvent(q, row.id, 'run.finished', SYSTEM, { run_id: run.id, phase: envelope.phase, stop_reason: envelope.stop_reason }, now));
}
