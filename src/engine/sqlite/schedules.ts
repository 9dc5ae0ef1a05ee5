/** The SQLite adapter of the ScheduleStore port. */
import { checkCardAuthor, mayRemoveSchedule } from '../authority.js';
import { EngineError } from '../errors.js';
import { SCHEDULER, type ScheduleRow as Row, fireKey, skippedFire, toSchedule } from '../schedule-rows.js';
import type { ScheduleStore } from '../schedules.js';
import { checkedScheduleStore } from '../schedule-input.js';
import { isTerminal } from '../states.js';
import type { Card, TaskState } from '../types.js';
import { DEFAULT_QUEUE, SCHEDULER_SCOPE, prepareCreate } from './create.js';
import { createEventWriter } from './rows.js';
import type { SqliteTaskStore } from './task-store.js';

export function createSqliteScheduleStore(store: SqliteTaskStore): ScheduleStore {
  const { db, write } = store;
  const writer = createEventWriter(db);
  const create = prepareCreate(db, writer);
  const insert = db.prepare<Record<string, unknown>, Row>(
    `INSERT INTO schedules (cron, title, card, queue, catch_up, overlap, creator, creator_role, last_fire_at, created_at)
     VALUES (@cron, @title, @card, @queue, @catch_up, @overlap, @creator, @creator_role, @now, @now) RETURNING *`,
  );
  const all = db.prepare<[], Row>('SELECT * FROM schedules ORDER BY id');
  const get = db.prepare<[number], Row>('SELECT * FROM schedules WHERE id = ?');
  const remove = db.prepare('DELETE FROM schedules WHERE id = ?');
  const stateOf = db.prepare<[number], { state: TaskState }>('SELECT state FROM tasks WHERE id = ?');
  const advance = db.prepare('UPDATE schedules SET last_fire_at = MAX(last_fire_at, ?), last_task_id = ? WHERE id = ?');

  // Inputs are checked once for both adapters (schedule-input.ts).
  return checkedScheduleStore({
    addSchedule: async (input, creator) =>
      (await write('add schedule', (events, now) => {
        const verdict = checkCardAuthor(input.card, creator);
        if (!verdict.ok) throw new EngineError(verdict.code, verdict.message);
        const row = insert.get({
          cron: input.cron,
          title: input.title,
          card: JSON.stringify(input.card),
          queue: input.queue ?? DEFAULT_QUEUE,
          catch_up: input.catchUp ?? 'skip',
          overlap: input.overlap === false ? 0 : 1,
          creator: creator.id,
          creator_role: creator.role,
          now,
        })!;
        events.push(writer.append(null, 'schedule.added', creator, { schedule_id: row.id, cron: row.cron }, now));
        return toSchedule(row);
      })).value,
    listSchedules: async () => all.all().map(toSchedule),
    removeSchedule: async (id, actor) => {
      await write('remove schedule', (events, now) => {
        const row = get.get(id);
        if (row === undefined) throw new EngineError('VALIDATION_FAILED', `schedule ${id} does not exist`, { schedule_id: id });
        const verdict = mayRemoveSchedule(actor, { id, creator: row.creator, creatorRole: row.creator_role });
        if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { schedule_id: id });
        remove.run(id);
        events.push(writer.append(null, 'schedule.removed', actor, { schedule_id: id }, now));
      });
    },
    fireSchedule: async (id, fireTimes, advanceTo) =>
      (await write('fire schedule', (events, now) => {
        const result = { created: [] as number[], skipped: [] as number[] };
        const row = get.get(id);
        if (row === undefined) return result; // removed meanwhile
        let lastTask = row.last_task_id;
        for (const at of [...fireTimes].sort((a, b) => a - b)) {
          if (at <= row.last_fire_at) continue; // another daemon handled it
          const previous = lastTask === null ? undefined : stateOf.get(lastTask);
          if (row.overlap === 0 && previous !== undefined && !isTerminal(previous.state)) {
            events.push(writer.append(null, 'schedule.skipped', SCHEDULER, skippedFire(id, at, lastTask!, previous.state), now));
            result.skipped.push(at);
            continue;
          }
          const [made] = create(
            [{ title: row.title, card: JSON.parse(row.card) as Card, queue: row.queue, idempotencyKey: fireKey(id, at) }],
            { id: row.creator, role: row.creator_role },
            now,
            events,
            SCHEDULER_SCOPE,
          );
          lastTask = made!.task.id;
          if (made!.created) result.created.push(made!.task.id);
        }
        advance.run(advanceTo, lastTask, id);
        return result;
      })).value,
  });
}
