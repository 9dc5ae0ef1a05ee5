/**
 * createWorker: taskloop's queue, leases, fencing and dead-peer recovery around a handler of
 * the user's own (a LangGraph graph, an OpenAI Agents SDK run, plain code), without cards,
 * the task loop or worker threads. The handler runs in this process; up to `concurrency` at
 * once.
 *
 * What it does as the daemon does (daemon.ts):
 * - it registers in the daemons registry (RunStore.registerDaemon) and each task it holds
 *   is claimed with a worker slot id `<worker id>/<n>`, so one heartbeat write per beat
 *   (heartbeatDaemon) keeps every lease it holds, and a peer on the same host that sees
 *   its pid gone (reclaimDeadDaemons, every `deadCheckMs`) requeues its tasks at once;
 * - it runs the stale sweep (for peers on other hosts, whose death shows only as a lease
 *   running out);
 * - every write for a task presents its claim token: a worker that lost its claim gets
 *   STALE_CLAIM and the handler's result is not written.
 *
 * Which tasks: every pending task of `queue` it may claim (for its agent, capabilities
 * met), with or without a card — the card, if any, is the handler's input. A daemon claims
 * only tasks with a card from its own queue, so give the handler's tasks a queue of their own.
 *
 * A handler that returns moves the task in_progress → review → completed (or stops at
 * review with `finish: 'review'`) with the returned value as its result. One that throws
 * requeues the task while attempts remain (max_attempts), else fails it; the reason names
 * the error.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  type ClaimedTask,
  EngineError,
  type RunStore,
  type Task,
  type TaskManager,
  asAgent,
  assertBindableName,
  describeError,
  isEngineError,
  systemActor,
} from '../engine/index.js';

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
  /** The queue to claim from (required: see the module comment). */
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
  /** Longest nap of an idle slot; a commit by any process wakes it sooner. @defaultValue 1000 */
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

interface Held {
  task: ClaimedTask;
  slotId: string;
  abort: AbortController;
  /** close() gave the task back: whatever the handler returns is not written. */
  released: boolean;
}

const MAX_CONCURRENCY = 256;
const QUEUE = /^[A-Za-z0-9_.:-]{1,64}$/;
/** A failure reason keeps the error's first line, clipped (reasons are at most 2000 characters). */
const REASON_CHARS = 500;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const bad = (message: string): never => {
  throw new EngineError('VALIDATION_FAILED', `createWorker: ${message}`);
};

function checkOptions(opts: WorkerOptions): void {
  if (typeof opts !== 'object' || opts === null) bad('options must be an object');
  if (typeof opts.store?.tm?.claimTask !== 'function' || typeof opts.store?.runs?.heartbeatDaemon !== 'function') {
    bad('store must be an open store (openStore) or a daemon: { tm, runs }');
  }
  if (typeof opts.handler !== 'function') bad('handler must be a function (task, ctx) => result');
  if (typeof opts.queue !== 'string' || !QUEUE.test(opts.queue)) bad(`queue ${JSON.stringify(opts.queue)} must be letters, digits and _ . : - (1 to 64)`);
  const whole = (name: keyof WorkerOptions, min: number, max = Number.MAX_SAFE_INTEGER) => {
    const value = opts[name];
    if (value !== undefined && (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)) {
      bad(`${name} ${String(value)} is not a whole number from ${min}${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max}`}`);
    }
  };
  whole('concurrency', 1, MAX_CONCURRENCY);
  whole('leaseMs', 100, 24 * 3_600_000);
  whole('idleMs', 10);
  whole('deadCheckMs', 10);
  whole('sweepMs', 0);
  if (opts.finish !== undefined && opts.finish !== 'completed' && opts.finish !== 'review') bad(`finish '${String(opts.finish)}' is not completed or review`);
  if (opts.agent !== undefined) assertBindableName(opts.agent, 'createWorker: agent');
}

/** The handler's value as the JSON that will be stored, or why it cannot be. */
function asJson(value: unknown): { ok: true; json: unknown } | { ok: false; why: string } {
  if (value === undefined) return { ok: true, json: null };
  try {
    const text = JSON.stringify(value);
    return text === undefined ? { ok: false, why: 'the handler returned a value with no JSON form' } : { ok: true, json: JSON.parse(text) as unknown };
  } catch (err) {
    return { ok: false, why: `the handler's result is not JSON: ${describeError(err)}` };
  }
}

const firstLine = (text: string) => {
  const line = text.split('\n')[0] ?? '';
  return line.length > REASON_CHARS ? `${line.slice(0, REASON_CHARS - 1)}…` : line;
};

export async function createWorker(opts: WorkerOptions): Promise<Worker> {
  checkOptions(opts);
  const { tm, runs } = opts.store;
  const log = opts.log ?? (() => undefined);
  const host = hostname();
  const id = `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const agent = opts.agent ?? assertBindableName(`worker-${host}-${process.pid}`.slice(0, 100), 'createWorker: agent');
  const concurrency = opts.concurrency ?? 1;
  const leaseMs = opts.leaseMs ?? 30_000;
  const idleMs = opts.idleMs ?? 1000;
  const finishAt = opts.finish ?? 'completed';
  const me = asAgent(agent);
  await runs.registerDaemon({ id, host, pid: process.pid, agent, threads: concurrency });

  let closing = false;
  /** Slots between a claim and the write that ends it: the heartbeat keeps their leases. */
  const busy = new Set<string>();
  const held = new Map<number, Held>();
  const waiters = new Set<() => void>();
  const wakeAll = () => {
    for (const w of [...waiters]) w();
  };
  const nap = (ms: number) =>
    new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      waiters.add(done);
    });

  /** Aborts the handlers whose claim is gone (reclaimed, cancelled, finished elsewhere). */
  const stillOurs = (now: Task, h: Held) =>
    (now.state === 'claimed' || now.state === 'in_progress') && now.assignee === agent && now.attempts === h.task.attempts;
  const checkHeld = async () => {
    for (const h of [...held.values()]) {
      if (h.abort.signal.aborted) continue;
      let now: Task;
      try {
        now = await tm.store.getTask(h.task.id, false);
      } catch (err) {
        if (isEngineError(err) && err.code === 'TASK_NOT_FOUND') now = { ...h.task, state: 'cancelled' };
        else continue; // a read that failed says nothing about the claim
      }
      if (!stillOurs(now, h)) {
        log(`task ${h.task.id}: claim lost (the task is ${now.state}${now.assignee !== null && now.assignee !== agent ? `, held by ${now.assignee}` : ''}); its handler is aborted`);
        h.abort.abort(new EngineError('STALE_CLAIM', `task ${h.task.id}: the claim of ${agent} was lost (the task is ${now.state})`, { task_id: h.task.id }));
      }
    }
  };
  // Coalesced: at most one check running, and one more queued behind it.
  let checking: Promise<void> | undefined;
  let recheck = false;
  const checkSoon = () => {
    if (held.size === 0) return;
    if (checking !== undefined) {
      recheck = true;
      return;
    }
    checking = checkHeld().finally(() => {
      checking = undefined;
      if (recheck && !closing) {
        recheck = false;
        checkSoon();
      }
    });
  };
  const unwatch = tm.store.watch(() => {
    wakeAll();
    checkSoon();
  });

  /** A fenced move of a held task; a lost claim is logged, never thrown. */
  const move = async (task: ClaimedTask, what: string, input: Omit<Parameters<TaskManager['transitionTask']>[0], 'taskId' | 'claimToken'>): Promise<boolean> => {
    try {
      await tm.transitionTask({ ...input, taskId: task.id, claimToken: task.claimToken });
      return true;
    } catch (err) {
      if (isEngineError(err) && err.code === 'STALE_CLAIM') log(`task ${task.id}: claim lost before ${what} (STALE_CLAIM); nothing was written`);
      else log(`task ${task.id}: ${what} failed: ${describeError(err)}`);
      return false;
    }
  };
  const requeueOrFail = (task: ClaimedTask, why: string) =>
    task.attempts < task.maxAttempts
      ? move(task, 'requeue', { to: 'pending', actor: systemActor('daemon'), reason: `${firstLine(why)} (attempt ${task.attempts} of ${task.maxAttempts}; requeued)` })
      : move(task, 'failing it', { to: 'failed', actor: me, reason: `${firstLine(why)} (attempt ${task.attempts} of ${task.maxAttempts})` });

  const run = async (task: ClaimedTask, slotId: string): Promise<void> => {
    const h: Held = { task, slotId, abort: new AbortController(), released: false };
    held.set(task.id, h);
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await opts.handler(task, { signal: h.abort.signal, agent, slotId, tm }) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    held.delete(task.id);
    if (h.released) {
      log(`task ${task.id}: its handler ended after the task was given back; its ${outcome.ok ? 'result' : 'error'} is not written`);
      return;
    }
    if (!outcome.ok) {
      await requeueOrFail(task, `handler failed: ${describeError(outcome.error)}`);
      return;
    }
    const result = asJson(outcome.value);
    if (!result.ok) {
      await requeueOrFail(task, result.why);
      return;
    }
    const then = finishAt === 'completed' ? [{ to: 'completed' as const, actor: systemActor('acceptance'), reason: 'the handler returned' }] : undefined;
    try {
      await tm.transitionTask({ taskId: task.id, claimToken: task.claimToken, to: 'review', actor: me, result: result.json, ...(then === undefined ? {} : { then }) });
    } catch (err) {
      if (isEngineError(err) && err.code === 'STALE_CLAIM') log(`task ${task.id}: claim lost before its result was written (STALE_CLAIM); the result is dropped`);
      else if (isEngineError(err) && err.code === 'VALIDATION_FAILED') await requeueOrFail(task, `the handler's result was refused: ${err.message}`);
      else {
        // A store fault (a full disk): let the lease go, so the sweep gives the task back.
        log(`task ${task.id}: writing its result failed: ${describeError(err)}; its lease is let go`);
        await runs.expireSlot(slotId).catch(() => undefined);
      }
    }
  };

  const backoff = (failures: number) => Math.min(2000, 50 * 2 ** Math.min(failures, 6));
  const slot = async (n: number): Promise<void> => {
    const slotId = `${id}/${n}`;
    let failures = 0;
    while (!closing) {
      busy.add(slotId);
      let task: ClaimedTask | null;
      try {
        task = await tm.claimTask({ agent, queue: opts.queue, leaseMs, start: true, workerId: slotId, ...(opts.capabilities === undefined ? {} : { capabilities: opts.capabilities }) });
        failures = 0;
      } catch (err) {
        busy.delete(slotId);
        failures++;
        if (failures === 1) log(`worker ${slotId}: claim failed: ${describeError(err)}; retrying`);
        await nap(backoff(failures));
        continue;
      }
      if (task === null) {
        busy.delete(slotId);
        await nap(idleMs);
        continue;
      }
      if (closing) {
        await move(task, 'giving it back', { to: 'pending', actor: systemActor('daemon'), reason: 'worker closing' });
      } else {
        await run(task, slotId);
      }
      busy.delete(slotId);
    }
  };
  const slots = Array.from({ length: concurrency }, (_, n) => slot(n));

  // Timers: each skips a beat while its previous run is still going.
  const timers: NodeJS.Timeout[] = [];
  const every = (ms: number, what: string, fn: () => Promise<void>) => {
    let running = false;
    let failing = false;
    timers.push(setInterval(() => {
      if (running || closing) return;
      running = true;
      fn().then(() => {
        if (failing) log(`${what}: works again`);
        failing = false;
      }, (err: unknown) => {
        if (!failing) log(`${what} failed: ${describeError(err)}`);
        failing = true;
      }).finally(() => (running = false));
    }, ms));
  };
  every(Math.max(50, Math.floor(leaseMs / 3)), 'heartbeat', async () => {
    await runs.heartbeatDaemon(id, [...busy]);
    checkSoon();
  });
  every(opts.deadCheckMs ?? 250, 'dead-peer check', async () => {
    const reclaimed = await runs.reclaimDeadDaemons(host, id, pidAlive);
    if (reclaimed.length > 0) {
      log(`reclaimed tasks ${reclaimed.join(', ')} from a peer that is gone`);
      wakeAll();
    }
  });
  const sweepMs = opts.sweepMs ?? 5000;
  if (sweepMs > 0) {
    every(sweepMs, 'sweep', async () => {
      const swept = await tm.sweep();
      if (swept.requeued.length + swept.failed.length > 0) wakeAll();
    });
  }

  let resolveClosed!: () => void;
  const closed = new Promise<void>((r) => (resolveClosed = r));
  let closing$: Promise<void> | undefined;
  const close = (graceMs = 10_000): Promise<void> => {
    closing$ ??= (async () => {
      closing = true;
      wakeAll();
      const drained = Promise.all(slots).then(() => true);
      let timer: NodeJS.Timeout | undefined;
      const inTime = await Promise.race([drained, new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs)))]);
      clearTimeout(timer);
      for (const h of [...held.values()]) {
        // Given back first, then aborted: a handler that returns at once finds it released.
        h.released = true;
        await move(h.task, 'giving it back', { to: 'pending', actor: systemActor('daemon'), reason: `worker closing: the handler did not finish within ${graceMs} ms` });
        h.abort.abort(new Error('worker closing'));
      }
      if (!inTime) log(`grace period of ${graceMs} ms over; ${held.size} task(s) given back`);
      for (const t of timers) clearInterval(t);
      unwatch();
      await checking;
      await runs.unregisterDaemon(id).catch((err: unknown) => log(`leaving the registry failed: ${describeError(err)}`));
      resolveClosed();
    })();
    return closing$;
  };

  log(`worker ${id} started: ${concurrency} slot(s) as ${agent} on queue ${opts.queue}`);
  return {
    id,
    agent,
    get active() {
      return held.size;
    },
    close,
    closed,
  };
}
