/**
 * What enters a RunStore, checked once for both adapters (sqlite/, postgres/), before any
 * statement runs: a bad value is a one-line VALIDATION_FAILED that changes nothing, the same
 * on both stores. Before this, an id past a bigint, a NUL in a step's error or a reason with a
 * control character reached PostgreSQL as its raw 22P02/22021/22P05 (and on SQLite a page
 * size that was not an integer was a raw SQLITE_MISMATCH).
 *
 * Text the loop writes on a step (a tool's name, an error, a stop reason) may quote what an
 * agent or a planner wrote; the loop makes it printable before writing (workers/loop-phases.ts),
 * and the check here is the backstop: no NUL (PostgreSQL stores none) and no lone surrogate
 * (stored as U+FFFD while the event's JSON keeps the escape). Reasons are one line (reasonText).
 */
import { EngineError } from './errors.js';
import type { RunStore } from './run-store.js';
import { CONTROL_STATES, type Fence, RUN_PHASES, STEP_KINDS, STEP_STATUSES, type StepWrite, type Usage } from './runs.js';
import { LIMITS, actor as actorSchema, checkReason, name, parse } from './schemas.js';
import { LONE_SURROGATE } from './text.js';

const UNSTORABLE = new RegExp(`\u0000|${LONE_SURROGATE.source}`);

function refuse(what: string, why: string): never {
  throw new EngineError('VALIDATION_FAILED', `${what}: ${why}`);
}

/** A row id: a positive safe integer. */
export function checkId(value: unknown, what: string): void {
  if (!Number.isSafeInteger(value) || (value as number) < 1) refuse(what, 'must be a positive integer id');
}

/** Text both stores keep as written: a string without NUL or lone surrogates, at most `max` characters. */
export function checkStoredText(value: unknown, what: string, max: number): void {
  if (typeof value !== 'string') refuse(what, 'must be a string');
  if (value.length > max) refuse(what, `at most ${max} characters`);
  if (UNSTORABLE.test(value)) refuse(what, 'must not contain NUL or a lone surrogate');
}

const optionalText = (value: unknown, what: string, max: number) => value === undefined || checkStoredText(value, what, max);
const TOOL_CHARS = 1000;
const ERROR_CHARS = 8000;
const KEY_CHARS = 200;

/** A whole number the stores keep as a bigint: a count, a duration, a time. */
function checkWhole(value: unknown, what: string, min = 0): void {
  if (!Number.isSafeInteger(value) || (value as number) < min) refuse(what, `must be a whole number${min === 0 ? ' from 0' : ''}`);
}
/** A step's duration: the adapters round it (the loop measures with performance.now). */
function checkDuration(value: unknown, what: string): void {
  if (typeof value !== 'number' || !(value >= 0 && value <= Number.MAX_SAFE_INTEGER)) refuse(what, 'must be a number of milliseconds from 0');
}
const optionalWhole = (value: unknown, what: string) => value === undefined || value === null || checkWhole(value, what);

function checkUsage(u: Usage | undefined, what: string): void {
  if (u === undefined) return;
  for (const key of ['steps', 'writeCalls', 'pending', 'tokens', 'consecutiveFailures'] as const) optionalWhole(u[key], `${what}: usage.${key}`);
  if (u.cost !== undefined && !(Number.isFinite(u.cost) && u.cost >= 0)) refuse(`${what}: usage.cost`, 'must be a finite number from 0');
}

const KINDS: ReadonlySet<unknown> = new Set(STEP_KINDS);
const STEP_ENDS: ReadonlySet<unknown> = new Set(STEP_STATUSES.filter((st) => st !== 'started'));
const CONTROLS: ReadonlySet<unknown> = new Set(CONTROL_STATES);
const oneOf = (set: ReadonlySet<unknown>, value: unknown, what: string) => set.has(value) || refuse(what, `must be one of ${[...set].join(', ')}`);

function checkFence(f: Fence): void {
  checkId(f?.taskId, 'fence: taskId');
}

/** A stop reason is a name (one line, 1 to 100 characters, no controls, well formed). */
const checkStopReason = (value: unknown, what: string): void => void parse(name, value, what);

const FINAL: ReadonlySet<unknown> = new Set(RUN_PHASES.filter((ph) => ph !== 'running' && ph !== 'paused'));

function checkFinalPhase(value: unknown, what: string): void {
  if (!FINAL.has(value)) refuse(what, `must be one of ${[...FINAL].join(', ')}`);
}

function checkWrites(writes: readonly StepWrite[] | undefined, what: string): void {
  if (writes === undefined) return;
  if (!Array.isArray(writes)) refuse(what, 'must be a list of step writes');
  for (const w of writes) {
    if ('record' in w) {
      checkId(w.record.runId, `${what}: runId`);
      oneOf(KINDS, w.record.kind, `${what}: kind`);
      oneOf(STEP_ENDS, w.record.status, `${what}: status`);
      checkDuration(w.record.durationMs, `${what}: durationMs`);
      checkWhole(w.record.startedAt, `${what}: startedAt`);
      optionalWhole(w.record.tokens, `${what}: tokens`);
      checkUsage(w.record.usage, what);
      optionalText(w.record.tool, `${what}: tool`, TOOL_CHARS);
      optionalText(w.record.error, `${what}: error`, ERROR_CHARS);
      optionalText(w.record.idempotencyKey, `${what}: idempotencyKey`, KEY_CHARS);
    } else if ('begin' in w) checkBegin(w.begin, what);
    else checkFinish(w.finish, what);
  }
}

function checkBegin(input: Parameters<RunStore['beginStep']>[1], what: string): void {
  checkId(input.runId, `${what}: runId`);
  oneOf(KINDS, input.kind, `${what}: kind`);
  optionalWhole(input.startedAt, `${what}: startedAt`);
  optionalText(input.tool, `${what}: tool`, TOOL_CHARS);
  optionalText(input.idempotencyKey, `${what}: idempotencyKey`, KEY_CHARS);
  checkWrites(input.before, what);
}

function checkFinish(input: Parameters<RunStore['finishStep']>[1], what: string): void {
  checkId(input.stepId, `${what}: stepId`);
  oneOf(STEP_ENDS, input.status, `${what}: status`);
  checkDuration(input.durationMs, `${what}: durationMs`);
  optionalWhole(input.tokens, `${what}: tokens`);
  checkUsage(input.usage, what);
  optionalText(input.error, `${what}: error`, ERROR_CHARS);
  checkWrites(input.before, what);
}

/**
 * `inner` with its inputs checked first. Each check throws inside an async function, so a
 * refusal is a rejected promise as a store fault is, never a synchronous throw.
 */
export function checkedRunStore(inner: RunStore): RunStore {
  return {
    ...inner,
    openRun: async (f, budget) => (checkFence(f), inner.openRun(f, budget)),
    beginStep: async (f, input) => (checkFence(f), checkBegin(input, 'begin step'), inner.beginStep(f, input)),
    writeSteps: async (f, writes) => (checkFence(f), checkWrites(writes, 'write steps'), inner.writeSteps(f, writes)),
    finishStep: async (f, input) => (checkFence(f), checkFinish(input, 'finish step'), inner.finishStep(f, input)),
    setPaused: async (f, runId, paused, reason) => (checkFence(f), checkId(runId, 'pause run: runId'), checkReason(reason, 'pause run'), inner.setPaused(f, runId, paused, reason)),
    finishRun: async (f, input) => {
      checkFence(f);
      checkId(input.runId, 'finish run: runId');
      checkFinalPhase(input.phase, 'finish run: phase');
      checkStopReason(input.stopReason, 'finish run: stopReason');
      checkUsage(input.usage, 'finish run');
      if (!Array.isArray(input.moves)) refuse('finish run: moves', 'must be a list');
      for (const m of input.moves) checkReason(m.reason, 'finish run: move');
      checkWrites(input.before, 'finish run');
      return inner.finishRun(f, input);
    },
    recordRestart: async (f, runId, reason) => (checkFence(f), checkId(runId, 'restart run: runId'), checkReason(reason, 'restart run'), inner.recordRestart(f, runId, reason)),
    parkRun: async (f, input) => (checkFence(f), checkId(input.runId, 'park run: runId'), checkStopReason(input.stopReason, 'park run: stopReason'), checkUsage(input.usage, 'park run'), inner.parkRun(f, input)),
    resumeRun: async (input) => (checkId(input.taskId, 'resume run: taskId'), parse(actorSchema, input.actor, 'resume run: actor'), checkReason(input.reason, 'resume run'), inner.resumeRun(input)),
    releaseRun: async (f, runId, reason) => (checkFence(f), checkId(runId, 'release run: runId'), checkReason(reason, 'release run'), inner.releaseRun(f, runId, reason)),
    getRun: async (runId) => (checkId(runId, 'run id'), inner.getRun(runId)),
    getScreen: async (runId) => (checkId(runId, 'run id'), inner.getScreen(runId)),
    runsOf: async (taskId) => (checkId(taskId, 'task id'), inner.runsOf(taskId)),
    getControl: async (taskId, opts) => (checkId(taskId, 'task id'), inner.getControl(taskId, opts)),
    setControl: async (request) => {
      if (request.target !== 'all') {
        if (!Array.isArray(request.target)) refuse('control: target', "must be task ids or 'all'");
        for (const id of request.target) checkId(id, 'control: task id');
      }
      oneOf(CONTROLS, request.state, 'control: state');
      parse(actorSchema, request.actor, 'control: actor');
      checkReason(request.reason, 'control');
      return inner.setControl(request);
    },
    breakerAcquire: async (tool, policy) => (checkStoredText(tool, 'breaker: tool', TOOL_CHARS), inner.breakerAcquire(tool, policy)),
    breakerRecord: async (tool, ok, policy, taskId) => {
      checkStoredText(tool, 'breaker: tool', TOOL_CHARS);
      if (taskId !== undefined) checkId(taskId, 'breaker: task id');
      return inner.breakerRecord(tool, ok, policy, taskId);
    },
    parkForApproval: async (f, input, usage) => {
      checkFence(f);
      checkId(input.runId, 'park for approval: runId');
      checkId(input.stepId, 'park for approval: stepId');
      checkStoredText(input.tool, 'park for approval: tool', TOOL_CHARS);
      optionalWhole(input.expiresAt, 'park for approval: expiresAt');
      checkUsage(usage, 'park for approval');
      return inner.parkForApproval(f, input, usage);
    },
    approvalForStep: async (stepId) => (checkId(stepId, 'step id'), inner.approvalForStep(stepId)),
    useApproval: async (f, id) => (checkFence(f), checkId(id, 'approval id'), inner.useApproval(f, id)),
    decideApproval: async (input) => (checkId(input.approvalId, 'approval id'), parse(actorSchema, input.actor, 'decide approval: actor'), checkReason(input.reason, 'decide approval'), inner.decideApproval(input)),
    listApprovals: async (state, limit) => {
      if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 1 || limit > LIMITS.pageMax)) refuse('list approvals: limit', `must be an integer from 1 to ${LIMITS.pageMax}`);
      return inner.listApprovals(state, limit);
    },
    getApproval: async (id) => (checkId(id, 'approval id'), inner.getApproval(id)),
    runStats: async (since) => (checkWhole(since, 'run stats: since', Number.MIN_SAFE_INTEGER), inner.runStats(since)),
    compact: async (before) => {
      // A time before 1970 compacts nothing (a retention longer than the clock's age).
      if (!Number.isSafeInteger(before)) refuse('compact: before', 'must be a time in epoch milliseconds');
      return inner.compact(before);
    },
  };
}
