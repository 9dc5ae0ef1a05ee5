/**
 * zod schemas of the HTTP bodies and query strings, snake_case as clients write them. They
 * mirror the engine's limits (LIMITS), so a refusal names the field the client sent; the
 * engine checks everything again behind them.
 */
import { z } from 'zod/v4';
import { LIMITS, TASK_STATES } from '../../engine/index.js';

const noControl = (s: string) => !/[\u0000-\u001f\u007f-\u009f]/.test(s);
const name = z.string('must be a string').min(1, 'must not be empty').max(LIMITS.nameChars, `at most ${LIMITS.nameChars} characters`).refine(noControl, 'must not contain control characters');
const token = z.string('must be a string').regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'letters, digits and _ . : - only, at most 64');
const reason = z.string('must be a string').max(LIMITS.reasonChars, `at most ${LIMITS.reasonChars} characters`).refine(noControl, 'must not contain control characters').optional();

export const createTaskBody = z.strictObject({
  title: z.string('must be a string').trim().min(1, 'must not be empty').max(LIMITS.titleChars, `at most ${LIMITS.titleChars} characters`).refine(noControl, 'must not contain control characters'),
  card: z.record(z.string(), z.unknown(), 'must be a JSON object').optional(),
  priority: z.int('must be an integer').min(-LIMITS.priority).max(LIMITS.priority).optional(),
  depends_on: z.array(z.int('must be a task id').positive('must be a task id'), 'must be an array of task ids').max(LIMITS.dependencies).optional(),
  idempotency_key: name.optional(),
  /** ISO 8601 with a time zone, e.g. 2026-01-01T09:00:00Z. */
  run_after: z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone (e.g. 2026-01-01T09:00:00Z)' }).optional(),
  queue: token.optional(),
  for_agent: name.optional(),
  requires: z.array(token, 'must be an array of capabilities').max(LIMITS.capabilities).optional(),
  max_attempts: z.int('must be an integer').min(1).max(LIMITS.maxAttempts).optional(),
  /** Attached (the default): the task's event stream runs it. False: it is queued for daemons. */
  attach: z.boolean('must be true or false').default(true),
});
export type CreateTaskBody = z.infer<typeof createTaskBody>;

export const reasonBody = z.strictObject({ reason });

const intText = (what: string, min: number, max: number) =>
  z.string().regex(/^\d{1,15}$/, `must be ${what}`).transform(Number).pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

export const listTasksQuery = z.strictObject({
  state: z.array(z.enum(TASK_STATES, `must be one of ${TASK_STATES.join(', ')}`)).optional(),
  assignee: name.optional(),
  queue: token.optional(),
  limit: intText('an integer', 1, LIMITS.pageMax).optional(),
  after: intText('a task id', 0, Number.MAX_SAFE_INTEGER).optional(),
});

/** GET /api/tasks/:id: `events_after` sends only the events past that cursor (a board has the rest from the stream). */
export const taskDetailQuery = z.strictObject({
  events_after: intText('an event id', 0, Number.MAX_SAFE_INTEGER).optional(),
});

/** GET /api/runs/:id: `steps_after` sends only the steps past that seq (a board that has the earlier ones, finished). */
export const runDetailQuery = z.strictObject({
  steps_after: intText('a step seq', 0, Number.MAX_SAFE_INTEGER).optional(),
});

export const APPROVAL_STATES = ['pending', 'approved', 'rejected', 'expired', 'used', 'revoked'] as const;

export const listApprovalsQuery = z.strictObject({
  state: z.enum([...APPROVAL_STATES, 'all'], `must be one of ${APPROVAL_STATES.join(', ')} or all`).default('pending'),
  limit: intText('an integer', 1, LIMITS.pageMax).optional(),
});

/**
 * A query string as an object for the schemas: repeated keys, and comma-separated values
 * of the keys in `lists`, become arrays.
 */
export function queryObject(query: URLSearchParams, lists: string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of new Set(query.keys())) {
    const values = query.getAll(key);
    out[key] = lists.includes(key) ? values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '') : values.at(-1);
  }
  return out;
}
