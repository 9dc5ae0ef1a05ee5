/**
 * Task creation, fenced transitions and the stale sweep on PostgreSQL, each inside the
 * caller's transaction (task-store.ts). Concurrency, where SQLite had one writer at a time:
 * - idempotency: `ON CONFLICT DO NOTHING` on the scoped key, then the winner's row is read
 *   (a second creator with the same key waits for the first to commit and gets its task);
 * - dependencies: a new task locks its dependencies `FOR SHARE` while it counts the unmet
 *   ones, so a dependency completing meanwhile either commits first (and counts as met) or
 *   waits for the new task's dependency rows (and releases it);
 * - transitions lock the task row, so moves of one task are serialized.
 */
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, checkAcyclic, scopeOf, topoOrder } from '../creation.js';
import { requirementSet } from '../claim-needs.js';
import { EngineError } from '../errors.js';
import { type DependencyRow, type TaskRow, checkStepActor, dependencyRefusal, stageMove, toTask } from '../task-rows.js';
import { SWEEP_BATCH, type SweepBatch, type SweepCursor, asTasksOwn } from '../sweeps.js';
import type { Actor, BatchTaskInput, CreateResult, Task, TaskEvent, TransitionInput } from '../types.js';
import { NOW_MS, type Query } from './connection.js';
import { workChannels } from './watch.js';
import { appendEvents, commitMoves, holdsEvents, lockTask, reclaimTask } from './moves.js';

type Row = TaskRow & Record<string, unknown>;

const INSERT_COLUMNS =
  'title, state, priority, creator, creator_role, max_attempts, queue, for_agent, requires, depends_on, idempotency_key, idempotency_scope, run_after, unmet_deps, created_at, updated_at, card, delayed';

/**
 * The INSERT's values of one task (state and the times are written by the statement). The
 * last, `delayed`: not yet due, so out of the claimable parts until a claim releases it
 * (schema version 9); null when `now` is (createOne: the statement compares on its clock).
 */
const valuesOf = (input: BatchTaskInput, creator: Actor, now: number | null, depList: number[], key: string | null, scope: string | null, unmet: number): unknown[] => [
  input.title,
  input.priority ?? 0,
  creator.id,
  creator.role,
  input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
  input.queue ?? DEFAULT_QUEUE,
  input.forAgent ?? null,
  requirementSet(input.requires),
  depList.length > 0 ? JSON.stringify(depList) : null,
  key,
  scope,
  input.runAfter ?? now,
  unmet,
  now,
  JSON.stringify(input.card ?? {}),
  now === null ? null : input.runAfter !== undefined && input.runAfter > now,
];

type Created = Pick<Task, 'id' | 'title' | 'priority' | 'queue' | 'dependsOn' | 'runAfter'>;

const createdEvent = (task: Created, creator: Actor, now: number): TaskEvent => ({
  id: 0,
  taskId: task.id,
  type: 'task.created',
  actor: creator.id,
  actorRole: creator.role,
  data: { title: task.title, to: 'pending', priority: task.priority, queue: task.queue, depends_on: task.dependsOn, run_after: task.runAfter },
  createdAt: now,
});

/**
 * A batch of independent tasks (no keys, no dependencies): one INSERT of all rows and one of
 * all their events, instead of three statements per task. Ids come from the identity in the
 * order of the VALUES rows, so the ascending ids are the inputs' in order.
 */
async function createPlain(q: Query, inputs: BatchTaskInput[], creator: Actor, now: number, events: TaskEvent[]): Promise<CreateResult[]> {
  const results: CreateResult[] = [];
  for (let at = 0; at < inputs.length; at += 1000) {
    const chunk = inputs.slice(at, at + 1000);
    const params: unknown[] = [];
    const rows = chunk.map((input) => {
      const values = valuesOf(input, creator, now, [], null, null, 0);
      const n = params.push(...values) - values.length;
      const p = (k: number) => `$${n + k}`;
      return `(${p(1)}, 'pending', ${p(2)}, ${p(3)}, ${p(4)}, ${p(5)}, ${p(6)}, ${p(7)}, ${p(8)}, ${p(9)}, ${p(10)}, ${p(11)}, ${p(12)}, ${p(13)}, ${p(14)}, ${p(14)}, ${p(15)}, ${p(16)})`;
    });
    const inserted = (await q<Row>(`INSERT INTO tasks (${INSERT_COLUMNS}) VALUES ${rows.join(', ')} RETURNING *`, params)).sort((a, b) => a.id - b.id);
    const tasks = inserted.map(toTask);
    const created = tasks.map((t) => createdEvent(t, creator, now));
    await appendEvents(q, created);
    events.push(...created);
    for (const task of tasks) results.push({ task, created: true });
  }
  return results;
}

/** A create that depends on no other row: no idempotency key, no dependencies, no ref. */
export const isPlain = (i: BatchTaskInput): boolean =>
  i.idempotencyKey === undefined && (i.dependsOn?.length ?? 0) === 0 && (i.dependsOnRefs?.length ?? 0) === 0 && i.ref === undefined;

/**
 * One task without a key, dependencies or a ref, written outside any transaction of ours: its
 * row, its event and its queue's claimers' wake-up (watch.ts workChannels) in one statement (atomic as any statement), sent
 * in one round trip with its values bound. Its times are the database's clock, read once by
 * the statement (`fixedNow`: a test's pinned clock). The event's data is the text the other
 * creates write (run_after, the row's, is its last key), so both stores' logs read alike.
 */
export async function createOne(query: Query, input: BatchTaskInput, creator: Actor, fixedNow: number | undefined): Promise<{ result: CreateResult; event: TaskEvent }> {
  // Without a pinned clock the times are null here: the statement writes c.now in their place.
  const values = valuesOf(input, creator, fixedNow ?? null, [], null, null, 0);
  const event = createdEvent({ id: 0, title: input.title, priority: input.priority ?? 0, queue: input.queue ?? DEFAULT_QUEUE, dependsOn: [], runAfter: 0 }, creator, 0);
  const { run_after: _, ...head } = event.data;
  const prefix = `${JSON.stringify(head).slice(0, -1)},"run_after":`;
  const [row] = await query<Row & { event_id: number }>(
    `WITH c AS (SELECT coalesce($14::bigint, ${NOW_MS}) AS now),
     t AS (INSERT INTO tasks (${INSERT_COLUMNS})
       SELECT $1, 'pending', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, coalesce($12::bigint, c.now), $13, c.now, c.now, $15,
         coalesce($16::boolean, coalesce($12::bigint, c.now) > c.now) FROM c
       RETURNING *),
     e AS (INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at)
       SELECT t.id, $17, $18, $19, pg_catalog.concat($20::text, t.run_after, '}'), t.created_at FROM t RETURNING id)
     SELECT t.*, (SELECT id FROM e) AS event_id,
       pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema(), $21::text), '') AS woke,
       pg_catalog.pg_notify(pg_catalog.concat('taskloop_', pg_catalog.current_schema(), $22::text), '') AS woke_any FROM t`,
    [...values, event.type, event.actor, event.actorRole, prefix, ...workChannels({ all: false, queues: new Set([input.queue ?? DEFAULT_QUEUE]) })],
  );
  const { event_id: eventId, woke: _woke, woke_any: _any, ...taskRow } = row as Row & { event_id: number; woke: unknown; woke_any: unknown };
  const task = toTask(taskRow as Row);
  event.id = eventId;
  event.taskId = task.id;
  event.createdAt = task.createdAt;
  event.data = { ...head, run_after: task.runAfter };
  return { result: { task, created: true }, event };
}

/** Creates `inputs` inside `q`'s transaction. */
export async function createTasks(q: Query, inputs: BatchTaskInput[], creator: Actor, now: number, events: TaskEvent[], scope = scopeOf(creator)): Promise<CreateResult[]> {
  if (inputs.length > 1 && inputs.every(isPlain)) {
    return createPlain(q, inputs, creator, now, events);
  }
  checkAcyclic(inputs);
  const idByRef = new Map<string, number>();
  const resultAt = new Map<BatchTaskInput, CreateResult>();
  const pendingDeps: Array<{ id: number; deps: number[] }> = [];
  for (const input of topoOrder(inputs)) {
    const key = input.idempotencyKey ?? null;
    if (key !== null) {
      const [existing] = await q<Row>('SELECT * FROM tasks WHERE idempotency_scope = $1 AND idempotency_key = $2', [scope, key]);
      if (existing !== undefined) {
        resultAt.set(input, { task: toTask(existing), created: false });
        if (input.ref !== undefined) idByRef.set(input.ref, existing.id);
        continue;
      }
    }
    const deps = new Set<number>(input.dependsOn ?? []);
    for (const ref of input.dependsOnRefs ?? []) deps.add(idByRef.get(ref)!);
    const depList = [...deps].sort((a, b) => a - b);
    let unmet = 0;
    if (depList.length > 0) {
      const rows = new Map(
        (await q<DependencyRow & { id: number }>('SELECT id, state, creator, creator_role, assignee, for_agent FROM tasks WHERE id = ANY($1::bigint[]) ORDER BY id FOR SHARE', [depList])).map((r) => [r.id, r]),
      );
      for (const dep of depList) {
        const refusal = dependencyRefusal(dep, rows.get(dep), creator);
        if (refusal !== null) throw refusal;
        if (rows.get(dep)!.state !== 'completed') unmet++;
      }
    }
    // The row and its event in one statement: everything the event says is known before the
    // insert but the id (the event is written only if the row is, so a key taken meanwhile
    // writes neither). Events the transaction holds back must keep their lower ids: then the
    // event waits for the commit like theirs.
    const values = valuesOf(input, creator, now, depList, key, key === null ? null : scope, unmet);
    const created = createdEvent(
      { id: 0, title: input.title, priority: input.priority ?? 0, queue: input.queue ?? DEFAULT_QUEUE, dependsOn: depList, runAfter: input.runAfter ?? now },
      creator,
      now,
    );
    const together = !holdsEvents(q);
    const text = `WITH t AS (INSERT INTO tasks (${INSERT_COLUMNS})
       VALUES ($1, 'pending', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15, $16)
       ON CONFLICT (idempotency_scope, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
       RETURNING *)${
         together
           ? `, e AS (INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at)
       SELECT t.id, $17, $18, $19, $20, $14 FROM t RETURNING id)
       SELECT t.*, (SELECT id FROM e) AS event_id FROM t`
           : ' SELECT t.*, NULL::bigint AS event_id FROM t'
       }`;
    const params = together ? [...values, created.type, created.actor, created.actorRole, JSON.stringify(created.data)] : values;
    const inserted = await q<Row & { event_id: number | null }>(text, params);
    const row = inserted[0];
    if (row === undefined) {
      // Another creator committed this key after the lookup above: its task is the answer.
      const [existing] = await q<Row>('SELECT * FROM tasks WHERE idempotency_scope = $1 AND idempotency_key = $2', [scope, key]);
      if (existing === undefined) throw new EngineError('STORE_BUSY', `create: the idempotency key ${key} was taken and released meanwhile; nothing was written`);
      resultAt.set(input, { task: toTask(existing), created: false });
      if (input.ref !== undefined) idByRef.set(input.ref, existing.id);
      continue;
    }
    if (input.ref !== undefined) idByRef.set(input.ref, row.id);
    if (depList.length > 0) pendingDeps.push({ id: row.id, deps: depList });
    const { event_id: eventId, ...taskRow } = row;
    const task = toTask(taskRow as Row);
    created.taskId = task.id;
    if (together) created.id = eventId!;
    else await appendEvents(q, [created]);
    events.push(created);
    resultAt.set(input, { task, created: true });
  }
  for (const { id, deps } of pendingDeps) {
    await q('INSERT INTO task_deps (task_id, depends_on) SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING', [id, deps]);
  }
  return inputs.map((input) => resultAt.get(input)!);
}

/** Moves a task (and its `then` moves) inside `q`'s transaction; the row it left. */
export async function transition(q: Query, input: TransitionInput, now: number, events: TaskEvent[]): Promise<TaskRow> {
  let row = await lockTask(q, input.taskId);
  if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${input.taskId} does not exist`, { task_id: input.taskId });
  // Each step is checked against the row as the step before left it; the row is written once.
  const staged: TaskEvent[] = [];
  const steps = [{ to: input.to, actor: input.actor, reason: input.reason, result: input.result }, ...(input.then ?? [])];
  for (const step of steps) {
    checkStepActor(row, input.claimToken, step.actor);
    const { next, event } = stageMove(row, step, now);
    staged.push(event);
    events.push(event);
    row = next;
  }
  return commitMoves(q, row, staged, now, events);
}

export async function markStale(q: Query, now: number): Promise<number> {
  const rows = await q<{ id: number }>(
    `UPDATE tasks SET stale_since = $1
     WHERE lease_expires_at < $1 AND stale_since IS NULL AND state IN ('claimed', 'in_progress') RETURNING id`,
    [now],
  );
  return rows.length;
}

/**
 * The second phase of the sweep: tasks whose lease was seen expired at least `graceMs` ago
 * and not renewed since go back to pending (or fail on their last attempt). Rows another
 * transaction holds (a heartbeat, a move) are skipped: the next sweep looks again.
 */
export async function reclaimStale(q: Query, graceMs: number, now: number, events: TaskEvent[], marked: number, at: SweepCursor, skip: readonly number[]): Promise<SweepBatch> {
  const expired = await q<Row>(
    `SELECT * FROM tasks WHERE state = $3 AND id > $4 AND lease_expires_at < $1 AND stale_since <= $1 - $2::bigint
       AND NOT (id = ANY($5::bigint[]))
     ORDER BY id LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED`,
    [now, graceMs, at.state, at.after, skip],
  );
  const batch: SweepBatch = { marked, requeued: [], failed: [], read: expired.length, last: expired.at(-1)?.id ?? at.after };
  for (const row of expired) {
    const to = await asTasksOwn(row.id, () => reclaimTask(q, row, 'lease expired', now, events));
    (to === 'failed' ? batch.failed : batch.requeued).push(row.id);
  }
  return batch;
}
