/**
 * createWorker's public shape — its options, the context a handler gets, the handle it
 * returns — and the check of the options at the edge: bad input is one VALIDATION_FAILED
 * (or RESERVED_NAME for an agent name that is not the worker's to take) before anything is
 * registered or claimed. Inside, the worker trusts the settings it gets from here.
 */
import { hostname } from 'node:os';
import { type ClaimedTask, EngineError, LIMITS, type RunStore, type TaskManager, assertBindableName } from '../engine/index.js';

export interface WorkerContext {
  /**
   * Fires when the claim is lost (the lease ran out and the task was reclaimed, or it was
   * cancelled), and when `close()`'s grace runs out. A handler should stop soon after.
   */
  readonly signal: AbortSignal;
  /** The agent this worker claims as. */
  readonly agent: string;
  /** The slot holding this task, `<worker id>/<n>` (the task's worker id). */
  readonly slotId: string;
  /** The task manager, e.g. to create follow-up tasks. */
  readonly tm: TaskManager;
}

export type WorkerHandler = (task: ClaimedTask, ctx: WorkerContext) => unknown;

export interface WorkerOptions {
  /** An open store (openStore) or anything with its `tm` and `runs`, such as a Daemon. */
  store: { readonly tm: TaskManager; readonly runs: RunStore };
  /** The queue to claim from (required: see createWorker's module comment). */
  queue: string;
  /** Runs one task; its resolved value (JSON) becomes the task's result. */
  handler: WorkerHandler;
  /** @defaultValue `worker-<host>-<pid>` */
  agent?: string;
  /** Offered to tasks that `require` capabilities. @defaultValue none */
  capabilities?: string[];
  /** Handlers running at once. @defaultValue 1 */
  concurrency?: number;
  /** Lease of each claim; the heartbeat renews it every third of it. @defaultValue 30000 */
  leaseMs?: number;
  /** Where a handler that returned leaves its task. @defaultValue 'completed' */
  finish?: 'completed' | 'review';
  /**
   * Longest wait of an idle worker before it looks for a task again; a commit by any
   * process, or a handler ending, wakes it sooner. @defaultValue 1000
   */
  idleMs?: number;
  /** How often to look for dead peers (workers and daemons) on this host. @defaultValue 250 */
  deadCheckMs?: number;
  /** How often to run the stale sweep; 0 runs none (another process sweeps). @defaultValue 5000 */
  sweepMs?: number;
  /** One line per notable thing (a lost claim, a failing beat). @defaultValue no logging */
  log?: (line: string) => void;
}

export interface Worker {
  /** Its row in the daemons registry. */
  readonly id: string;
  readonly agent: string;
  /** Handlers running now. */
  readonly active: number;
  /**
   * Stops claiming, lets running handlers finish within `graceMs`, then aborts the rest and
   * gives their tasks back (pending, fenced: a late result is not written), and leaves the
   * registry. Does not close the store.
   */
  close(graceMs?: number): Promise<void>;
  /** Resolves once closed. */
  readonly closed: Promise<void>;
}

/** The options with their defaults filled in, checked. */
export interface WorkerSettings {
  readonly agent: string;
  readonly queue: string;
  readonly capabilities: string[] | undefined;
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly finish: 'completed' | 'review';
  readonly idleMs: number;
  readonly deadCheckMs: number;
  readonly sweepMs: number;
  readonly log: (line: string) => void;
}

const MAX_CONCURRENCY = 256;
/** A queue or capability name, as the engine's claim takes it. */
const TOKEN = /^[A-Za-z0-9_.:-]{1,64}$/;

const bad = (message: string): never => {
  throw new EngineError('VALIDATION_FAILED', `createWorker: ${message}`);
};

/** Checks the options (throws on the first wrong one) and fills in the defaults. */
export function workerSettings(opts: WorkerOptions): WorkerSettings {
  if (typeof opts !== 'object' || opts === null) bad('options must be an object');
  if (typeof opts.store?.tm?.claimTask !== 'function' || typeof opts.store?.runs?.heartbeatDaemon !== 'function') {
    bad('store must be an open store (openStore) or a daemon: { tm, runs }');
  }
  if (typeof opts.handler !== 'function') bad('handler must be a function (task, ctx) => result');
  if (typeof opts.queue !== 'string' || !TOKEN.test(opts.queue)) bad(`queue ${JSON.stringify(opts.queue)} must be letters, digits and _ . : - (1 to 64)`);
  const whole = (name: keyof WorkerOptions, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const value = opts[name];
    if (value === undefined) return fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      bad(`${name} ${String(value)} is not a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`);
    }
    return value as number;
  };
  const caps = opts.capabilities;
  if (caps !== undefined && (!Array.isArray(caps) || caps.length > LIMITS.capabilities || !caps.every((c) => typeof c === 'string' && TOKEN.test(c)))) {
    bad(`capabilities must be a list of at most ${LIMITS.capabilities} names of letters, digits and _ . : - (1 to 64 each)`);
  }
  if (opts.finish !== undefined && opts.finish !== 'completed' && opts.finish !== 'review') bad(`finish '${String(opts.finish)}' is not completed or review`);
  if (opts.log !== undefined && typeof opts.log !== 'function') bad('log must be a function (line) => void');
  const settings: WorkerSettings = {
    queue: opts.queue,
    capabilities: caps === undefined ? undefined : [...caps],
    concurrency: whole('concurrency', 1, 1, MAX_CONCURRENCY),
    leaseMs: whole('leaseMs', 30_000, 100, 24 * 3_600_000),
    idleMs: whole('idleMs', 1000, 10),
    deadCheckMs: whole('deadCheckMs', 250, 10),
    sweepMs: whole('sweepMs', 5000, 0),
    finish: opts.finish ?? 'completed',
    agent: opts.agent === undefined
      ? assertBindableName(`worker-${hostname()}-${process.pid}`.slice(0, 100), 'createWorker: agent')
      : assertBindableName(opts.agent, 'createWorker: agent'),
    log: opts.log ?? (() => undefined),
  };
  return settings;
}
