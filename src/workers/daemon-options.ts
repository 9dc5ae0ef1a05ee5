/** The daemon's options, and their checks before anything is opened or registered. */
import { EngineError, assertBindableName } from '../engine/index.js';
import { checkCron } from './cron.js';
import type { WorkerConfig } from './protocol.js';

export interface DaemonOptions {
  dbPath: string;
  /** @defaultValue 'normal' */
  durability?: 'normal' | 'full';
  /** Worker threads. @defaultValue 2 */
  workers?: number;
  /**
   * Runs in flight in the whole daemon, spread over its threads (at most ceil(concurrency /
   * workers) on one). A run waiting on a model, a tool or a timer costs memory, not a thread.
   * `concurrency` equal to `workers` is one run per thread. @defaultValue max(64, workers)
   */
  concurrency?: number;
  /** The agent name the threads claim as. @defaultValue `daemon-<host>-<pid>` */
  agent?: string;
  capabilities?: string[];
  /** @defaultValue 'default' */
  queue?: string;
  /** @defaultValue 30000 */
  leaseMs?: number;
  /**
   * The longest a run may last, whatever its card says: a run started here gets a deadline at
   * most this long after its start (the earlier of this and the card's own), fixed on the run
   * like every budget. How long a run holds a seat is otherwise the card's author's choice,
   * and an agent may write cards. As River's JobTimeout. @defaultValue no cap
   */
  maxRunMs?: number;
  toolModules?: string[];
  /** Plugins loaded in every worker thread. @defaultValue [task_enforcer] */
  plugins?: Array<{ module: string; options?: Record<string, unknown> }>;
  breaker?: Partial<WorkerConfig['breaker']>;
  /** @defaultValue every 5 seconds */
  sweepCron?: string;
  /** @defaultValue 1000 */
  sweepGraceMs?: number;
  /** When the scheduler looks for due fire times. @defaultValue every second */
  schedulerCron?: string;
  /** Compact steps and events of tasks that finished longer ago than this (off by default). */
  retainMs?: number;
  /** How often to look for dead daemons (on this host; on a shared store, silent ones anywhere). @defaultValue 250 */
  deadCheckMs?: number;
  /**
   * On a store several machines share (PostgreSQL): a daemon silent this long in the
   * database's clock is taken for dead and its runs resume elsewhere. @defaultValue 5000
   */
  silentMs?: number;
  /** One line per notable thing. @defaultValue no logging */
  log?: (line: string) => void;
  /**
   * Gives up starting when aborted while the `--tools` and `--plugin` modules load (a slow or
   * hung module): startDaemon rejects with StartAborted, nothing opened or registered. Once
   * started, stop the daemon with its `stop()`.
   */
  startSignal?: AbortSignal;
}

const MAX_THREADS = 256;
const MAX_CONCURRENCY = 100_000;
export const DEFAULT_CONCURRENCY = 64;
/**
 * Checks the options before anything is opened or registered; VALIDATION_FAILED names the
 * first wrong one, by `names[option]` when given (the CLI's flags), else by the option.
 */
export function checkDaemonOptions(opts: DaemonOptions, names: Partial<Record<keyof DaemonOptions, string>> = {}): void {
  const bad = (option: keyof DaemonOptions, message: string): never => {
    throw new EngineError('VALIDATION_FAILED', `${names[option] ?? option}: ${message}`);
  };
  const forever = Number.MAX_SAFE_INTEGER;
  const whole = (option: keyof DaemonOptions, min: number, max: number, unit = '') => {
    const value = opts[option];
    if (value === undefined) return;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      bad(option, `${String(value)}${unit} is not a whole number ${max === forever ? `of at least ${min}${unit}` : `from ${min} to ${max}`}`);
    }
  };
  whole('workers', 1, MAX_THREADS);
  whole('concurrency', 1, MAX_CONCURRENCY);
  whole('leaseMs', 100, forever, ' ms');
  whole('maxRunMs', 1, forever, ' ms');
  whole('sweepGraceMs', 0, forever, ' ms');
  whole('retainMs', 1, forever, ' ms');
  whole('deadCheckMs', 10, forever, ' ms');
  whole('silentMs', 300, forever, ' ms');
  if (opts.queue?.trim() === '') bad('queue', 'must not be empty');
  if (opts.agent?.trim() === '') bad('agent', 'must not be empty');
  // The threads claim as this agent: it may not bear the operator's or a system actor's name.
  if (opts.agent !== undefined) assertBindableName(opts.agent, names.agent ?? 'agent');
  if (opts.sweepCron !== undefined) checkCron(opts.sweepCron);
  if (opts.schedulerCron !== undefined) checkCron(opts.schedulerCron);
}

/**
 * How long a daemon waits after a retention pass that found nothing before the next: a
 * hundredth of the retention period, from 5 s to 10 min. Each pass reads every finished
 * task's row until it has a batch (117-182 ms with 181,000 finished tasks and nothing to do),
 * and a task that becomes old enough a few minutes late against a period of days loses
 * nothing. A pass that compacted something is followed by the next at the sweep's pace.
 */
export function retentionIdleMs(retainMs: number): number {
  return Math.min(600_000, Math.max(5_000, Math.round(retainMs / 100)));
}
