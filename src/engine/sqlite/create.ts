/** Task creation: idempotency keys, dependencies (refs inside a batch, ids outside), cycles. */
import type { Actor, BatchTaskInput, CreateResult, TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { type EventWriter, type TaskRow, toTask } from './rows.js';
import { type DependencyRow, dependencyRefusal } from '../task-rows.js';
import { DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, checkAcyclic, scopeOf, topoOrder } from '../creation.js';
import { requirementSet } from '../claim-needs.js';

export { DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, SCHEDULER_SCOPE, scopeOf } from '../creation.js';

export type CreateTasks = (inputs: BatchTaskInput[], creator: Actor, now: number, events: TaskEvent[], scope?: string) => CreateResult[];

export function prepareCreate(db: Db, writer: EventWriter): CreateTasks {
  const byKey = db.prepare<[string, string], TaskRow>('SELECT * FROM tasks WHERE idempotency_scope = ? AND idempotency_key = ?');
  const depOf = db.prepare<[number], DependencyRow>('SELECT state, creator, creator_role, assignee, for_agent FROM tasks WHERE id = ?');
  const insert = db.prepare(
    `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, for_agent, requires, depends_on,
       idempotency_key, idempotency_scope, run_after, delayed, unmet_deps, created_at, updated_at, card, last_event_id)
     VALUES (@title, 'pending', @priority, @creator, @creator_role, @max_attempts, @queue, @for_agent, @requires, @depends_on,
       @idempotency_key, @idempotency_scope, @run_after, @delayed, @unmet_deps, @now, @now, @card, @last_event_id)`,
  );
  // task.created starts the task's event chain (see the migration): the row points at it
  // from the start, since its id is known before it is written (max(id) + 1).
  const nextEventId = db.prepare<[], number>('SELECT coalesce(max(id), 0) + 1 FROM task_events').pluck(true);
  const setLastEvent = db.prepare('UPDATE tasks SET last_event_id = ? WHERE id = ?');
  const insertDep = db.prepare('INSERT OR IGNORE INTO task_deps (task_id, depends_on) VALUES (?, ?)');
  const getRow = db.prepare<[number], TaskRow>('SELECT * FROM tasks WHERE id = ?');

  return (inputs, creator, now, events, scope = scopeOf(creator)) => {
    checkAcyclic(inputs);
    const results: CreateResult[] = [];
    const idByRef = new Map<string, number>();
    const pendingDeps: Array<{ id: number; deps: number[] }> = [];

    // Resolve in dependency order so a ref always points at an id that already exists.
    const ordered = topoOrder(inputs);
    const resultAt = new Map<BatchTaskInput, CreateResult>();
    for (const input of ordered) {
      if (input.idempotencyKey !== undefined) {
        const existing = byKey.get(scope, input.idempotencyKey);
        if (existing !== undefined) {
          const result = { task: toTask(existing), created: false };
          resultAt.set(input, result);
          if (input.ref !== undefined) idByRef.set(input.ref, existing.id);
          continue;
        }
      }
      const deps = new Set<number>(input.dependsOn ?? []);
      for (const ref of input.dependsOnRefs ?? []) deps.add(idByRef.get(ref)!);
      let unmet = 0;
      for (const dep of deps) {
        const row = depOf.get(dep);
        const refusal = dependencyRefusal(dep, row, creator);
        if (refusal !== null) throw refusal;
        if (row!.state !== 'completed') unmet++;
      }
      const depList = [...deps].sort((a, b) => a - b);
      const createdEventId = nextEventId.get()!;
      const info = insert.run({
        title: input.title,
        priority: input.priority ?? 0,
        creator: creator.id,
        creator_role: creator.role,
        max_attempts: input.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
        queue: input.queue ?? DEFAULT_QUEUE,
        for_agent: input.forAgent ?? null,
        requires: requirementSet(input.requires),
        depends_on: depList.length > 0 ? JSON.stringify(depList) : null,
        idempotency_key: input.idempotencyKey ?? null,
        idempotency_scope: input.idempotencyKey === undefined ? null : scope,
        run_after: input.runAfter ?? now,
        // Not yet due: out of the claimable parts until a claim releases it (migration 13).
        delayed: input.runAfter !== undefined && input.runAfter > now ? 1 : 0,
        unmet_deps: unmet,
        now,
        card: JSON.stringify(input.card ?? {}),
        last_event_id: createdEventId,
      });
      const id = Number(info.lastInsertRowid);
      if (input.ref !== undefined) idByRef.set(input.ref, id);
      if (depList.length > 0) pendingDeps.push({ id, deps: depList });
      const task = toTask(getRow.get(id)!);
      const created: TaskEvent = {
        id: 0,
        taskId: id,
        type: 'task.created',
        actor: creator.id,
        actorRole: creator.role,
        data: {
          title: task.title,
          to: 'pending',
          priority: task.priority,
          queue: task.queue,
          depends_on: task.dependsOn,
          run_after: task.runAfter,
        },
        createdAt: now,
      };
      if (writer.appendChain(id, [created], undefined, 0) !== createdEventId) setLastEvent.run(created.id, id);
      events.push(created);
      resultAt.set(input, { task, created: true });
    }
    for (const { id, deps } of pendingDeps) for (const dep of deps) insertDep.run(id, dep);
    for (const input of inputs) results.push(resultAt.get(input)!);
    return results;
  };
}
