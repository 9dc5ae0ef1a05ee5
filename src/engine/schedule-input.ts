/**
 * What enters a ScheduleStore, checked once for both adapters before any statement runs. A
 * schedule makes tasks for as long as it lives, in its creator's name, so what it holds is held
 * to what a task's creation is: a title as a task's, a card as a task's, a queue as a token,
 * and a cron expression the scheduler can read (one that cannot be read would be stored, then
 * fail in every daemon's scheduler on every tick). Before this, the port checked nothing: a
 * title with an escape sequence was printed raw by `schedule list`, and on PostgreSQL a NUL
 * was the server's raw 22021.
 */
import { CronTime, validateCronExpression } from 'cron';
import { z } from 'zod/v4';
import { EngineError } from './errors.js';
import { checkId } from './run-input.js';
import type { AddScheduleInput, ScheduleStore } from './schedules.js';
import { card, parse, title, token } from './schemas.js';

const CRON_CHARS = 200;

/** Throws VALIDATION_FAILED unless `expr` is a cron expression (5 fields, or 6 with seconds). */
export function checkCron(expr: unknown): void {
  if (typeof expr !== 'string' || expr.length > CRON_CHARS || /[^\x20-\x7e]/.test(expr)) {
    throw new EngineError('VALIDATION_FAILED', `cron: must be a cron expression of printable ASCII, at most ${CRON_CHARS} characters`);
  }
  const { valid, error } = validateCronExpression(expr);
  if (!valid) throw new EngineError('VALIDATION_FAILED', `cron: '${expr}' is not a cron expression (${error?.message ?? 'invalid'})`);
  // Valid, and yet it may never fire (the 30th of February): the scheduler would meet that
  // on every tick.
  try {
    new CronTime(expr, 'UTC').getNextDateFrom(new Date(), 'UTC');
  } catch (err) {
    throw new EngineError('VALIDATION_FAILED', `cron: '${expr}' never fires (${err instanceof Error ? err.message : String(err)})`);
  }
}

const addScheduleInput = z.strictObject({
  cron: z.string('must be a string'),
  title,
  card,
  queue: token.optional(),
  catchUp: z.enum(['skip', 'one', 'all'], 'must be skip, one or all').optional(),
  overlap: z.boolean('must be true or false').optional(),
});

/** The input as the store writes it (a title trimmed), or VALIDATION_FAILED naming the field. */
export function parseAddSchedule(input: unknown): AddScheduleInput {
  const parsed = parse(addScheduleInput, input, 'add schedule');
  checkCron(parsed.cron);
  return parsed;
}

/** `inner` with its inputs checked first; a refusal is a rejected promise. */
export function checkedScheduleStore(inner: ScheduleStore): ScheduleStore {
  return {
    ...inner,
    addSchedule: async (input, creator) => inner.addSchedule(parseAddSchedule(input), creator),
    removeSchedule: async (id, actor) => (checkId(id, 'schedule id'), inner.removeSchedule(id, actor)),
    fireSchedule: async (id, fireTimes, advanceTo) => {
      checkId(id, 'schedule id');
      const isTime = (t: unknown) => Number.isSafeInteger(t);
      if (!Array.isArray(fireTimes) || !fireTimes.every(isTime) || !isTime(advanceTo)) {
        throw new EngineError('VALIDATION_FAILED', 'fire schedule: fire times and the cursor must be times in epoch milliseconds');
      }
      return inner.fireSchedule(id, fireTimes, advanceTo);
    },
  };
}
