/**
 * The PostgreSQL adapter of the ScheduleStore port. Every daemon runs the scheduler, and on
 * PostgreSQL they run on many machines at once: a fire locks the schedule's row
 * (`FOR UPDATE`) before it reads the cursor. The fire's idempotency key alone would keep
 * the task single, but not the rest of a fire: two fires reading the same cursor would
 * both write `schedule.skipped` for an overlapping fire, and each would move the cursor to
 * the task it saw. With the row locked, the second fire waits for the first to commit, then
 * reads the moved cursor (READ COMMITTED re-reads a locked row's newest version) and finds
 * those fire times handled. The key still guards a task an agent made under it first
 * (it is scoped to the scheduler, see creation.ts).
 */
import { checkCardAuthor, mayRemoveSchedule } from '../authority.js';
import { DEFAULT_QUEUE, SCHEDULER_SCOPE } from '../creation.js';
import { EngineError } from '../errors.js';
import { SCHEDULER, type ScheduleRow, fireKey, skippedFire, toSchedule } from '../schedule-rows.js';
import type { ScheduleStore } from '../schedules.js';
import { checkedScheduleStore } from '../schedule-input.js';
import { isTerminal } from '../states.js';
import type { Card, TaskState } from '../types.js';
import { appendEvent } from './moves.js';
import type { PgTaskStore } from './task-store.js';
import { createTasks } from './tasks.js';

type Row = ScheduleRow & Record<string, unknown>;

export function createPgScheduleStore(store: PgTaskStore): ScheduleStore {
  const { write, read } = store;
  const value = async <T>(p: Promise<{ value: T }>): Promise<T> => (await p).value;

  // Inputs are checked once for both adapters (schedule-input.ts).
  return checkedScheduleStore({
    addSchedule: (input, creator) =>
      value(
        write('add schedule', async (q, now, events) => {
          const verdict = checkCardAuthor(input.card, creator);
          if (!verdict.ok) throw new EngineError(verdict.code, verdict.message);
          const [row] = await q<Row>(
            `INSERT INTO schedules (cron, title, card, queue, catch_up, overlap, creator, creator_role, last_fire_at, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING *`,
            [
              input.cron,
              input.title,
              JSON.stringify(input.card),
              input.queue ?? DEFAULT_QUEUE,
              input.catchUp ?? 'skip',
              input.overlap === false ? 0 : 1,
              creator.id,
              creator.role,
              now,
            ],
          );
          events.push(await appendEvent(q, null, 'schedule.added', creator, { schedule_id: row!.id, cron: row!.cron }, now));
          return toSchedule(row!);
        }),
      ),
    listSchedules: () => read(async () => (await store.conn.query<Row>('SELECT * FROM schedules ORDER BY id')).map(toSchedule)),
    removeSchedule: async (id, actor) => {
      await write('remove schedule', async (q, now, events) => {
        // Locked: the check and the delete see the same row; a fire in flight finishes first.
        const [row] = await q<Row>('SELECT * FROM schedules WHERE id = $1 FOR UPDATE', [id]);
        if (row === undefined) throw new EngineError('VALIDATION_FAILED', `schedule ${id} does not exist`, { schedule_id: id });
        const verdict = mayRemoveSchedule(actor, { id, creator: row.creator, creatorRole: row.creator_role });
        if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { schedule_id: id });
        await q('DELETE FROM schedules WHERE id = $1', [id]);
        events.push(await appendEvent(q, null, 'schedule.removed', actor, { schedule_id: id }, now));
      });
    },
    fireSchedule: (id, fireTimes, advanceTo) =>
      value(
        write('fire schedule', async (q, now, events) => {
          const result = { created: [] as number[], skipped: [] as number[] };
          // Locked: see the module comment.
          const [row] = await q<Row>('SELECT * FROM schedules WHERE id = $1 FOR UPDATE', [id]);
          if (row === undefined) return result; // removed meanwhile
          let lastTask = row.last_task_id;
          for (const at of [...fireTimes].sort((a, b) => a - b)) {
            if (at <= row.last_fire_at) continue; // another daemon handled it
            const [previous] = lastTask === null ? [] : await q<{ state: TaskState }>('SELECT state FROM tasks WHERE id = $1', [lastTask]);
            if (row.overlap === 0 && previous !== undefined && !isTerminal(previous.state)) {
              events.push(await appendEvent(q, null, 'schedule.skipped', SCHEDULER, skippedFire(id, at, lastTask!, previous.state), now));
              result.skipped.push(at);
              continue;
            }
            const [made] = await createTasks(
              q,
              [{ title: row.title, card: JSON.parse(row.card) as Card, queue: row.queue, idempotencyKey: fireKey(id, at) }],
              { id: row.creator, role: row.creator_role },
              now,
              events,
              SCHEDULER_SCOPE,
            );
            lastTask = made!.task.id;
            if (made!.created) result.created.push(made!.task.id);
          }
          await q('UPDATE schedules SET last_fire_at = GREATEST(last_fire_at, $1::bigint), last_task_id = $2 WHERE id = $3', [advanceTo, lastTask, id]);
          return result;
        }),
      ),
  });
}
