/**
 * The daemon: a pool of worker threads that claim and run tasks, and the main thread's
 * duties — waking idle workers when any process commits, one heartbeat write per beat for
 * the whole daemon, recognising dead daemons on this host at once, the stale sweep on a
 * cron schedule, the scheduler, and a graceful shutdown that releases what it holds.
 *
 * Faults: the daemon dies only on purpose. Its options are checked before anything is
 * opened or registered (VALIDATION_FAILED). It refuses to start on a file that fails
 * `PRAGMA quick_check` (STORE_CORRUPT). A failing timer (heartbeat, dead-daemon check,
 * sweep, scheduler) or worker slot is one log line per streak of failures and is retried
 * with backoff; a run cut short by a store fault (a full disk) has its lease let go, so
 * the sweep gives its task back as soon as writes work again. A fault after which nothing
 * may be written (STORE_CORRUPT, STORE_REPLACED), met by any thread, stops the daemon:
 * one log line, no more claims, and `fault` names it (the CLI exits 1).
 */
import { hostname } from 'node:os';
import { BroadcastChannel } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EngineError,
  type ClaimedRun,
  type ClaimedTask,
  type RunStore,
  type TaskManager,
  createStores,
  poolSizeFor,
  createTaskManager,
  createWriteLock,
  FATAL_FAULTS,
  describeError,
  faultReporter,
  isEngineError,
} from '../engine/index.js';
import type { Job } from './cron.js';
import { DEFAULT_CONCURRENCY, type DaemonOptions, checkDaemonOptions } from './daemon-options.js';

export { DEFAULT_CONCURRENCY, type DaemonOptions, checkDaemonOptions } from './daemon-options.js';
import { cronWithBackoff, repeat } from './backoff.js';
import { budgetOfTask } from './budget.js';
import { type Holder, startHolder } from './holder.js';
import { DEFAULT_BREAKER } from './runner.js';
import { runSchedulerTick } from './scheduler.js';
import { type Pool, createPool } from './pool.js';
import { type DaemonBroadcast, type WorkerConfig, channelName } from './protocol.js';

export interface Daemon {
  readonly id: string;
  readonly tm: TaskManager;
  readonly runs: RunStore;
  /** The fault that stopped the daemon (STORE_CORRUPT, STORE_REPLACED), if one did. */
  readonly fault: EngineError | undefined;
  /** Stops claiming, lets in-flight steps finish within `graceMs`, releases leases, closes. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves when the daemon has stopped. */
  readonly stopped: Promise<void>;
}

const isFatal = (err: unknown): err is EngineError => isEngineError(err) && FATAL_FAULTS.has(err.code);
/** Store faults a run or a claim may be cut short by, that clear without a restart. */
const isStoreFault = (code: string): boolean => code.startsWith('STORE_');

/**
 * Capabilities held by one run at a time in a daemon: a desktop run owns the daemon's X
 * display (its keyboard and pointer). While one runs, the daemon claims without offering
 * them, so other desktop tasks wait for it or go to another daemon (route by capability).
 */
const EXCLUSIVE_CAPABILITIES: ReadonlySet<string> = new Set(['desktop']);
const holdsExclusive = (task: ClaimedTask): boolean => task.requires.some((c) => EXCLUSIVE_CAPABILITIES.has(c));
/** How long in-flight steps may take to finish when a fault stops the daemon: their writes are refused anyway. */
const FATAL_GRACE_MS = 2000;

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  checkDaemonOptions(opts);
  const log = opts.log ?? (() => undefined);
  const threads = opts.workers ?? 2;
  const concurrency = opts.concurrency ?? Math.max(DEFAULT_CONCURRENCY, threads);
  const leaseMs = opts.leaseMs ?? 30_000;
  const agent = opts.agent ?? `daemon-${hostname()}-${process.pid}`;
  const capabilities = opts.capabilities ?? [];
  const queue = opts.queue ?? 'default';
  const writeLock = createWriteLock();
  const stores = createStores({ database: opts.dbPath, durability: opts.durability, writeLock, log });
  const { store, runs, schedules } = stores;
  const tm = createTaskManager({ store, sweepGraceMs: opts.sweepGraceMs });

  // A fault after which nothing may be written, met by any thread: stop, once.
  let fault: EngineError | undefined;
  // Once a fault stops the daemon, the failures it causes in timers and slots say nothing new.
  const quiet = (line: string): void => {
    if (fault === undefined) log(line);
  };
  let holder: Holder;
  try {
    // A damaged file is refused before this daemon is registered or claims anything.
    stores.sqlite?.quickCheck();
    const { multipleHosts } = (await store.info()).capabilities;
    holder = await startHolder({ runs, agent, threads, leaseMs, log: quiet, multiHost: multipleHosts, silentMs: opts.silentMs });
  } catch (err) {
    await store.close();
    throw err;
  }
  const { id } = holder;
  const config: WorkerConfig = {
    dbPath: opts.dbPath,
    poolSize: poolSizeFor(Math.ceil(concurrency / threads)),
    durability: opts.durability ?? 'normal',
    daemonId: id,
    toolModules: opts.toolModules ?? [],
    plugins: opts.plugins ?? [{ module: 'task_enforcer' }],
    writeLock,
    breaker: { ...DEFAULT_BREAKER, ...opts.breaker },
  };

  let stopping = false;
  const waiters = new Set<() => void>();
  // Set by every wake: a commit that lands while a claim is in flight (after its look for a
  // claimable task) must not wait for the next nap's timeout to be claimed.
  let woken = false;
  const wakeAll = () => {
    woken = true;
    for (const w of [...waiters]) w();
  };
  // Only what can make a task claimable: on PostgreSQL a claim or a step of another daemon sends no NOTIFY.
  const unwatch = store.watch(wakeAll, 'work');
  /** Resolves on the next commit anywhere, a freed run slot, stop(), or after `ms`. */
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

  const fatal = (err: EngineError): void => {
    if (fault !== undefined) return;
    fault = err;
    log(`stopping: ${describeError(err)}`);
    void stop(FATAL_GRACE_MS);
  };
  stores.sqlite?.onFault(fatal);

  const pool: Pool = createPool({
    threads,
    perThread: Math.ceil(concurrency / threads),
    config,
    onError: (err) => (isFatal(err) ? fatal(err) : log(`worker thread error: ${describeError(err)}`)),
  });

  const sweep = async () => {
    const swept = await tm.sweep();
    if (swept.requeued.length + swept.failed.length > 0) log(`sweep: requeued ${swept.requeued.join(', ') || '-'}, failed ${swept.failed.join(', ') || '-'}`);
  };
  /** A sweep out of its schedule; a failure is left to the scheduled one. */
  const sweepNow = () => sweep().catch(() => undefined);

  // Backoff after failures: a timer that only stop() cuts short (a commit must not, unlike nap).
  const halt = new AbortController();
  const pause = (ms: number) => sleep(ms, undefined, { signal: halt.signal }).catch(() => undefined);
  const backoff = (failures: number) => Math.min(2000, 50 * 2 ** Math.min(failures, 6));

  /**
   * Lets go of the lease a slot holds, trying until a write works again (a full disk), then
   * sweeps at once and once more after the sweep's grace: the task is pending again within
   * about a second instead of after two cron sweeps.
   */
  const letGo = async (slotId: string): Promise<void> => {
    for (let failures = 0; ; failures++) {
      try {
        await runs.expireSlot(slotId);
        break;
      } catch (err) {
        if (isFatal(err) || stopping) return;
        await pause(backoff(failures));
      }
    }
    await sweepNow();
    await pause((opts.sweepGraceMs ?? 1000) + 50);
    if (!stopping) await sweepNow();
  };

  let inFlight = 0;
  let exclusiveRuns = 0;
  const running = new Set<Promise<void>>();

  /** Runs one claimed task on a thread; its slot stays busy (its lease renewed) until the run ends. */
  const runClaimed = async (claimed: ClaimedRun, slotId: string, exclusive: boolean): Promise<void> => {
    let lease: 'keep' | 'let go' = 'keep';
    try {
      const reply = await pool.run({ type: 'run', slotId, task: claimed.task, opened: claimed.opened });
      if (reply.type === 'ran') {
        log(`task ${reply.taskId} run ${reply.runId}: ${reply.phase} (${reply.stopReason})`);
      } else if (FATAL_FAULTS.has(reply.error.code)) {
        fatal(EngineError.from(reply.error));
      } else if (isStoreFault(reply.error.code)) {
        // The run stopped at a write that failed (it rolled back): give the task back soon.
        log(`task ${reply.taskId}: run cut short: ${reply.error.code}: ${reply.error.message}; its lease is let go`);
        lease = 'let go';
      } else {
        log(`task ${reply.taskId}: claim lost (${reply.error.code}): ${reply.error.message}`);
      }
    } catch (err) {
      // The thread failed (a thread that crashed or failed to load; piscina replaces it).
      // Whatever the run held comes back through the sweep once its lease is let go.
      if (isFatal(err)) fatal(err);
      else {
        log(`worker ${slotId} failed: ${describeError(err)} (task ${claimed.task.id}; its lease is let go)`);
        lease = 'let go';
      }
    } finally {
      holder.free(slotId);
      inFlight--;
      if (exclusive) exclusiveRuns--;
      wakeAll();
    }
    if (lease === 'let go') await letGo(slotId);
  };

  /**
   * The daemon's one claimer: it claims only while a run slot is free (back-pressure: a
   * daemon never holds a task it cannot start), each claim with its run opened in the same
   * transaction, and after finding nothing waits for the next commit anywhere.
   */
  const dispatch = async (): Promise<void> => {
    const report = faultReporter('claim', quiet);
    while (!stopping) {
      if (inFlight >= concurrency) {
        await nap(1000);
        continue;
      }
      woken = false;
      const slotId = holder.take();
      const offered = exclusiveRuns > 0 ? capabilities.filter((c) => !EXCLUSIVE_CAPABILITIES.has(c)) : capabilities;
      let claimed: ClaimedRun | null;
      try {
        // A daemon runs cards: a task without one is left for an agent to claim.
        claimed = await runs.claimRun({ agent, capabilities: offered, queue, leaseMs, workerId: slotId, withCard: true }, (task, now) => budgetOfTask(task.card, now));
        report.ok();
      } catch (err) {
        holder.free(slotId);
        if (isFatal(err)) {
          fatal(err);
          return;
        }
        report.failed(err);
        await pause(backoff(report.failures));
        continue;
      }
      if (claimed === null) {
        holder.free(slotId);
        // Something committed during the claim: look again at once rather than after a nap.
        if (!woken) await nap(1000);
        continue;
      }
      const exclusive = holdsExclusive(claimed.task);
      inFlight++;
      if (exclusive) exclusiveRuns++;
      const done = runClaimed(claimed, slotId, exclusive);
      running.add(done);
      void done.finally(() => running.delete(done));
    }
  };
  const dispatching = dispatch();

  const jobs: Job[] = [];
  jobs.push(
    repeat(opts.deadCheckMs ?? 250, 5000, async () => {
      const reclaimed = await holder.reclaimGone();
      if (reclaimed.length > 0) {
        log(`reclaimed tasks ${reclaimed.join(', ')} from a daemon that is gone`);
        wakeAll();
      }
    }, faultReporter('dead-daemon check', quiet)),
    cronWithBackoff(opts.sweepCron ?? '*/5 * * * * *', async () => {
      await sweep();
      const expired = await runs.expireApprovals();
      if (expired.length > 0) log(`approvals ${expired.join(', ')} expired`);
      if (opts.retainMs !== undefined) {
        const compacted = await runs.compact((await store.clock()) - opts.retainMs);
        if (compacted > 0) log(`retention: compacted the history of ${compacted} finished tasks`);
      }
    }, faultReporter('sweep', quiet)),
    cronWithBackoff(opts.schedulerCron ?? '* * * * * *', async () => {
      // Fire times by the store's clock: on PostgreSQL every daemon's scheduler agrees on it.
      const { created, skipped } = await runSchedulerTick(schedules, await store.clock());
      if (created.length > 0) log(`scheduler: created tasks ${created.join(', ')}`);
      if (skipped.length > 0) log(`scheduler: skipped ${skipped.length} fire(s) that would overlap`);
    }, faultReporter('scheduler', quiet)),
  );

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let stopping$: Promise<void> | undefined;

  const stop = (graceMs = 10_000): Promise<void> => {
    stopping$ ??= (async () => {
      stopping = true;
      halt.abort();
      for (const j of jobs) j.stop();
      const channel = new BroadcastChannel(channelName(id));
      channel.postMessage({ type: 'drain' } satisfies DaemonBroadcast);
      wakeAll();
      const drained = dispatching.then(() => Promise.all([...running])).then(() => true);
      const inTime = await Promise.race([drained, new Promise<false>((r) => setTimeout(() => r(false), graceMs).unref())]);
      channel.close();
      if (!inTime) log(`grace period of ${graceMs} ms over; stopping the threads that are still busy`);
      // Leases of anything still held are let go now, so another daemon takes over at once.
      for (const s of holder.busy()) await runs.expireSlot(s).catch(() => undefined);
      await pool.destroy();
      unwatch();
      await holder.stop();
      await tm.close();
      resolveStopped();
    })();
    return stopping$;
  };

  log(`daemon ${id} started: ${threads} workers, up to ${concurrency} runs in flight, as ${agent} on queue ${queue}, database ${opts.dbPath}`);
  return {
    id,
    tm,
    runs,
    stop,
    stopped,
    get fault() {
      return fault;
    },
  };
}
