/**
 * The schedules table as both adapters store it, and the pure parts of a fire: the row's
 * engine shape, the idempotency key of a fire time, the event of a skipped fire.
 */
import { systemActor } from './actors.js';
import type { Schedule } from './schedules.js';
import type { Card } from './types.js';

export interface ScheduleRow {
  id: number;
  cron: string;
  title: string;
  card: string;
  queue: string;
  catch_up: Schedule['catchUp'];
  overlap: number;
  creator: string;
  creator_role: Schedule['creatorRole'];
  last_fire_at: number;
  last_task_id: number | null;
  created_at: number;
}

export const toSchedule = (r: ScheduleRow): Schedule => ({
  id: r.id,
  cron: r.cron,
  title: r.title,
  card: JSON.parse(r.card) as Card,
  queue: r.queue,
  catchUp: r.catch_up,
  overlap: r.overlap === 1,
  creator: r.creator,
  creatorRole: r.creator_role,
  lastFireAt: r.last_fire_at,
  lastTaskId: r.last_task_id,
  createdAt: r.created_at,
});

export const SCHEDULER = systemActor('scheduler');

/** A fire's task key (in SCHEDULER_SCOPE): one task per schedule and fire time, however many daemons fire it. */
export const fireKey = (scheduleId: number, at: number): string => `schedule:${scheduleId}:${new Date(at).toISOString()}`;

/** The data of a `schedule.skipped` event: the fire came while the previous task was unfinished. */
export const skippedFire = (scheduleId: number, at: number, lastTask: number, state: string): Record<string, unknown> => ({
  schedule_id: scheduleId,
  fire_time: new Date(at).toISOString(),
  reason: `task ${lastTask} is still ${state}`,
});
