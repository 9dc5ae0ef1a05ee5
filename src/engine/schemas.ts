/**
 * zod schemas for what enters the engine through TaskManager, with the size limits.
 * Parsing failures become one-line VALIDATION_FAILED errors naming the field.
 */
import { z } from 'zod/v4';
import { EngineError } from './errors.js';
import { BINDABLE_NAME } from './actors.js';
import { MAX_JSON_DEPTH, depthMessage, nestsDeeper } from './json-depth.js';
import { LONE_SURROGATE } from './text.js';
import { ACTOR_ROLES, type Actor, type ActorRole, type ClaimInput, TASK_STATES, type TransitionInput } from './types.js';

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
  /** The latest time (epoch ms) a JavaScript Date holds. */
  timeMs: 8_640_000_000_000_000,
  /** Levels of objects and arrays in any JSON input (json-depth.ts). */
  jsonDepth: MAX_JSON_DEPTH,
} as const;

// Control characters (C0, DEL and C1) would break one-line CLI output and logs; everything else in
// Unicode is fine (values are bound as parameters, or on PostgreSQL written into a
// transaction's first statement as the hex of their bytes: never spliced into SQL as text).
const noControl = (s: string) => !/[\u0000-\u001f\u007f-\u009f]/.test(s);
// A lone surrogate is not text: the database stores U+FFFD in its place while the event's JSON
// keeps the escape, so the row and its own event would disagree about what was written.
const wellFormed = (s: string) => !LONE_SURROGATE.test(s);
const NOT_WELL_FORMED = 'must be well-formed Unicode (no lone surrogate)';

export const name = z
  .string()
  .min(1, 'must not be empty')
  .max(LIMITS.nameChars, `at most ${LIMITS.nameChars} characters`)
  .refine(noControl, 'must not contain control characters')
  .refine(wellFormed, NOT_WELL_FORMED);
export const token = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'letters, digits and _ . : - only, at most 64');
export const taskId = z.int('must be an integer task id').positive('must be a positive task id').max(Number.MAX_SAFE_INTEGER);
/** getTask's window on a task's events (store.ts EventWindow). */
export const eventWindow = z.strictObject({
  last: z.int('must be an integer').min(1).max(LIMITS.pageMax),
  beforeId: z.int('must be an integer event id').positive('must be a positive event id').max(Number.MAX_SAFE_INTEGER).optional(),
});

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

// The depth check aborts before the size check, whose JSON.stringify would overflow the stack.
const shallow = (v: unknown) => !nestsDeeper(v, LIMITS.jsonDepth);
const depthIssue = { message: depthMessage(LIMITS.jsonDepth), abort: true };

export const card = z
  .record(z.string(), z.unknown(), 'must be a JSON object')
  .refine(shallow, depthIssue)
  .refine((c) => byteLength(c) <= LIMITS.cardBytes, `at most ${LIMITS.cardBytes} bytes of JSON`);

export const actor = z.strictObject({ id: name, role: z.enum(ACTOR_ROLES) });

export const title = z
  .string('must be a string')
  .trim()
  .min(1, 'must not be empty')
  .max(LIMITS.titleChars, `at most ${LIMITS.titleChars} characters`)
  .refine(noControl, 'must not contain control characters')
  .refine(wellFormed, NOT_WELL_FORMED);

const createFields = {
  title,
  card: card.optional(),
  priority: z.int('must be an integer').min(-LIMITS.priority).max(LIMITS.priority).optional(),
  dependsOn: z.array(taskId).max(LIMITS.dependencies).optional(),
  idempotencyKey: name.optional(),
  // A time a Date can hold: past it, every surface that prints the task threw RangeError.
  runAfter: z.int().nonnegative().max(LIMITS.timeMs, 'must be a time before the year 275760').optional(),
  queue: token.optional(),
  // Only an agent bearing this name may claim it, and agents bear plain names (actors.ts):
  // any other text reserved the task for no one, and was quoted raw in every refused claim.
  forAgent: name.regex(BINDABLE_NAME, "must be an agent's name: ASCII letters, digits and . _ @ + - (at most 100)").optional(),
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
  withCard: z.boolean().optional(),
});

export const heartbeatInput = z.strictObject({
  taskId,
  agent: name,
  claimToken: name,
  leaseMs: z.int().min(100).max(LIMITS.leaseMs).optional(),
});

const result = z
  .unknown()
  .refine(shallow, depthIssue)
  .refine((r) => r === undefined || byteLength(r) <= LIMITS.resultBytes, `at most ${LIMITS.resultBytes} bytes of JSON`);
/**
 * Why, as an actor writes it on an event (a move, a cancel, a resume, an approval, a control):
 * one line, as a title. An agent's reason is printed in the operator's `events` and `task
 * show`, where a line break or an escape sequence forged lines and repainted the terminal;
 * and on PostgreSQL a NUL or a lone surrogate could not be read back from the event's JSON.
 */
export const reasonText = z
  .string()
  .max(LIMITS.reasonChars, `at most ${LIMITS.reasonChars} characters`)
  .refine(noControl, 'must not contain control characters')
  .refine(wellFormed, NOT_WELL_FORMED);
const reason = reasonText.optional();

/** A reason given with a call no schema here sees whole (resume, control, approval): VALIDATION_FAILED if it is not one. */
export function checkReason(value: string | undefined, what: string): void {
  if (value !== undefined) parse(reasonText, value, `${what}: reason`);
}

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
  visibleTo: actor.optional(),
  summary: z.boolean().optional(),
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

/*
 * Fast paths for the two inputs every task goes through (claim, and the transitions after
 * it). Each accepts only the plain, fully valid shapes (plain objects, no unknown keys, no
 * key set to undefined, no `result`) and returns what zod would return for them: a copy
 * with the keys in schema order. For anything else it returns undefined and the zod schema
 * decides, so every refusal is still zod's, with the same VALIDATION_FAILED message.
 */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const TOKEN = /^[A-Za-z0-9_.:-]{1,64}$/;
const STATES: ReadonlySet<unknown> = new Set(TASK_STATES);
const ROLES: ReadonlySet<unknown> = new Set(ACTOR_ROLES);

type Plain = Record<string, unknown>;
function isPlain(v: unknown): v is Plain {
  if (typeof v !== 'object' || v === null) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}
const isName = (v: unknown): v is string => typeof v === 'string' && v.length >= 1 && v.length <= LIMITS.nameChars && !CONTROL.test(v);
const isToken = (v: unknown): v is string => typeof v === 'string' && TOKEN.test(v);
const isInt = (v: unknown, min: number, max: number): v is number => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max;
const isTaskId = (v: unknown): v is number => isInt(v, 1, Number.MAX_SAFE_INTEGER);
const isReason = (v: unknown): v is string => typeof v === 'string' && v.length <= LIMITS.reasonChars && !CONTROL.test(v) && wellFormed(v);
function isTokenList(v: unknown): v is string[] {
  if (!Array.isArray(v) || Object.getPrototypeOf(v) !== Array.prototype || v.length > LIMITS.capabilities) return false;
  for (let i = 0; i < v.length; i++) if (!isToken(v[i])) return false; // holes read as undefined
  return true;
}

function quickActor(v: unknown): Actor | undefined {
  if (!isPlain(v)) return undefined;
  const keys = Object.keys(v);
  if (keys.length !== 2 || !isName(v.id) || !ROLES.has(v.role)) return undefined;
  return { id: v.id, role: v.role as ActorRole };
}

function quickClaimInput(v: unknown): ClaimInput | undefined {
  if (!isPlain(v)) return undefined;
  for (const key of Object.keys(v)) {
    const x = v[key];
    switch (key) {
      case 'agent':
      case 'workerId':
        if (!isName(x)) return undefined;
        break;
      case 'queue':
        if (!isToken(x)) return undefined;
        break;
      case 'capabilities':
        if (!isTokenList(x)) return undefined;
        break;
      case 'leaseMs':
        if (!isInt(x, 100, LIMITS.leaseMs)) return undefined;
        break;
      case 'taskId':
        if (!isTaskId(x)) return undefined;
        break;
      case 'start':
      case 'withCard':
        if (typeof x !== 'boolean') return undefined;
        break;
      default:
        return undefined;
    }
  }
  if (v.agent === undefined) return undefined;
  const out: ClaimInput = { agent: v.agent as string };
  if (v.capabilities !== undefined) out.capabilities = [...(v.capabilities as string[])];
  if (v.queue !== undefined) out.queue = v.queue as string;
  if (v.leaseMs !== undefined) out.leaseMs = v.leaseMs as number;
  if (v.taskId !== undefined) out.taskId = v.taskId as number;
  if (v.start !== undefined) out.start = v.start as boolean;
  if (v.workerId !== undefined) out.workerId = v.workerId as string;
  if (v.withCard !== undefined) out.withCard = v.withCard as boolean;
  return out;
}

type Step = NonNullable<TransitionInput['then']>[number];
function quickStep(v: unknown): Step | undefined {
  if (!isPlain(v)) return undefined;
  for (const key of Object.keys(v)) {
    if (key === 'to' || key === 'actor') continue;
    if (key !== 'reason' || !isReason(v.reason)) return undefined;
  }
  if (!STATES.has(v.to)) return undefined;
  const actor = quickActor(v.actor);
  if (actor === undefined) return undefined;
  const out: Step = { to: v.to as Step['to'], actor };
  if (v.reason !== undefined) out.reason = v.reason as string;
  return out;
}

function quickTransitionInput(v: unknown): TransitionInput | undefined {
  if (!isPlain(v)) return undefined;
  for (const key of Object.keys(v)) {
    const x = v[key];
    switch (key) {
      case 'taskId':
      case 'to':
      case 'actor':
        break;
      case 'then':
        if (x === undefined) return undefined;
        break;
      case 'claimToken':
        if (!isName(x)) return undefined;
        break;
      case 'reason':
        if (!isReason(x)) return undefined;
        break;
      default:
        return undefined; // `result` (size check) and unknown keys go through zod
    }
  }
  if (!isTaskId(v.taskId) || !STATES.has(v.to)) return undefined;
  const actor = quickActor(v.actor);
  if (actor === undefined) return undefined;
  const out: TransitionInput = { taskId: v.taskId, to: v.to as TransitionInput['to'], actor };
  if (v.claimToken !== undefined) out.claimToken = v.claimToken as string;
  if (v.reason !== undefined) out.reason = v.reason as string;
  if (v.then !== undefined) {
    if (!Array.isArray(v.then) || Object.getPrototypeOf(v.then) !== Array.prototype || v.then.length > 4) return undefined;
    const then: Step[] = [];
    for (let i = 0; i < v.then.length; i++) {
      const step = quickStep(v.then[i]);
      if (step === undefined) return undefined;
      then.push(step);
    }
    out.then = then;
  }
  return out;
}

/** `parse(claimInput, value, 'claim')`, with a fast path for valid plain input. */
export function parseClaimInput(value: unknown): ClaimInput {
  return quickClaimInput(value) ?? parse(claimInput, value, 'claim');
}

/** `parse(transitionInput, value, 'transition')`, with a fast path for valid plain input. */
export function parseTransitionInput(value: unknown): TransitionInput {
  return quickTransitionInput(value) ?? (parse(transitionInput, value, 'transition') as TransitionInput);
}
