/**
 * zod schemas for what enters the engine through TaskManager, with the size limits.
 * Parsing failures become one-line VALIDATION_FAILED errors naming the field.
 */
import { z } from 'zod';
import { EngineError } from './errors.js';
import { TASK_STATES } from './types.js';

export const LIMITS = {
  titleChars: 500,
  cardBytes: 256 * 1024,
  resultBytes: 256 * 1024,
  nameChars: 100,
  reasonChars: 2000,
  dependencies: 100,
  capabilities: 32,
  batch: 1000,
  pageMax: 1000,
  priority: 1_000_000,
  maxAttempts: 100,
  leaseMs: 24 * 3_600_000,
} as const;

// Control characters would break one-line CLI output and logs; everything else in
// Unicode is fine (values are bound as parameters, never spliced into SQL).
const noControl = (s: string) => !/[\u0000-\u001f\u007f]/.test(s);

export const name = z
  .string()
  .min(1, 'must not be empty')
  .max(LIMITS.nameChars, `at most ${LIMITS.nameChars} characters`)
  .refine(noControl, 'must not contain control characters');
export const token = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'letters, digits and _ . : - only, at most 64');
export const taskId = z.int('must be an integer task id').positive('must be a positive task id').max(Number.MAX_SAFE_INTEGER);

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

export const card = z
  .record(z.string(), z.unknown(), 'must be a JSON object')
  .refine((c) => byteLength(c) <= LIMITS.cardBytes, `at most ${LIMITS.cardBytes} bytes of JSON`);

export const actor = z.strictObject({ id: name, role: z.enum(['agent', 'operator', 'system']) });

const createFields = {
  title: z
    .string('must be a string')
    .trim()
    .min(1, 'must not be empty')
    .max(LIMITS.titleChars, `at most ${LIMITS.titleChars} characters`)
    .refine(noControl, 'must not contain control characters'),
  card: card.optional(),
  priority: z.int('must be an integer').min(-LIMITS.priority).max(LIMITS.priority).optional(),
  dependsOn: z.array(taskId).max(LIMITS.dependencies).optional(),
  idempotencyKey: name.optional(),
  runAfter: z.int().nonnegative().optional(),
  queue: token.optional(),
  forAgent: name.optional(),
  requires: z.array(token).max(LIMITS.capabilities).optional(),
  maxAttempts: z.int().min(1).max(LIMITS.maxAttempts).optional(),
};

export const createTaskInput = z.strictObject(createFields);
export const batchTaskInput = z.strictObject({
  ...createFields,
  ref: token.optional(),
  dependsOnRefs: z.array(token).max(LIMITS.dependencies).optional(),
});
export const batchInput = z.array(batchTaskInput).min(1).max(LIMITS.batch);

export const taskState = z.enum(TASK_STATES, `must be one of ${TASK_STATES.join(', ')}`);

export const claimInput = z.strictObject({
  agent: name,
  capabilities: z.array(token).max(LIMITS.capabilities).optional(),
  queue: token.optional(),
  leaseMs: z.int().min(100).max(LIMITS.leaseMs).optional(),
  taskId: taskId.optional(),
  start: z.boolean().optional(),
  workerId: name.optional(),
});

export const heartbeatInput = z.strictObject({
  taskId,
  agent: name,
  claimToken: name,
  leaseMs: z.int().min(100).max(LIMITS.leaseMs).optional(),
});

const result = z.unknown().refine((r) => r === undefined || byteLength(r) <= LIMITS.resultBytes, `at most ${LIMITS.resultBytes} bytes of JSON`);
const reason = z.string().max(LIMITS.reasonChars).optional();

export const transitionInput = z.strictObject({
  taskId,
  to: taskState,
  actor,
  claimToken: name.optional(),
  reason,
  result: result.optional(),
  then: z.array(z.strictObject({ to: taskState, actor, reason, result: result.optional() })).max(4).optional(),
});

export const findTasksQuery = z.strictObject({
  states: z.array(taskState).optional(),
  assignee: name.optional(),
  creator: name.optional(),
  queue: token.optional(),
  limit: z.int().min(1).max(LIMITS.pageMax).optional(),
  afterId: z.int().nonnegative().optional(),
});

/** Parses `value` or throws VALIDATION_FAILED with the first problem on one line. */
export function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length > 0 ? `${what}: ${issue.path.join('.')}` : what;
  throw new EngineError('VALIDATION_FAILED', `${where}: ${issue.message}`, {
    issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
  });
}
