/**
 * The daemon: a pool of worker threads that each claim and run many tasks at once
 * (worker-serve.ts), and the main thread's duties — one heartbeat write per beat for every
 * lease the threads hold, logging how each run ended, letting go of what a failed run or
 * thread held, recognising dead daemons on this host at once, the stale sweep on a cron
 * schedule, the scheduler, and a graceful shutdown that releases what it holds.
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
import { BroadcastChannel, MessageChannel } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EngineError,
  type RunStore,
  type TaskManager,
  createStores,
  poolSizeFor,
  createTaskManager,
  createWriteLock,
  FATAL_FAULTS,
  describeError,
  describeSweep,
  type FaultReporter,
  faultReporter,
  isEngineError,
  MAX_LOOKED_UP,
  claimWalks,
  redactUrl,
} from '../engine/index.js';
import type { Job } from './cron.js';
import { DEFAULT_CONCURRENCY, type DaemonOptions, checkDaemonOptions, retentionIdleMs } from './daemon-options.js';

export { DEFAULT_CONCURRENCY, type DaemonOptions, checkDaemonOptions } from './daemon-options.js';
import { cronWithBackoff, repeat, retryDelayMs } from './backoff.js';
import { createFaultLatch } from './fault-latch.js';
import { type Holder, startHolder } from './holder.js';
import { DEFAULT_BREAKER } from './runner.js';
import { runSchedulerTick } from './scheduler.js';
import { type Pool, createPool } from './pool.js';
import { createSeats, drainSeats, releaseThread } from './seats.js';
import { checkModules } from './module-check.js';
import { type DaemonBroadcast, type RunEnding, type ThreadNote, type WorkerConfig, channelName } from './protocol.js';

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

/** How long in-flight steps may take to finish when a fault stops the daemon: their writes are refused anyway. */
const FATAL_GRACE_MS = 2000;

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  checkDaemonOptions(opts);
  const toolModules = opts.toolModules ?? [];
  const plugins = opts.plugins ?? [{ module: 'task_enforcer' }];
  await checkModules(toolModules, plugins, undefined, opts.startSignal);
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
  const latch = createFaultLatch(log, describeError);
  // Once a fault stops the daemon, the failures it causes in timers and slots say nothing new.
  const quiet = (line: string): void => {
    if (latch.fault === undefined) log(line);
  };
  let holder: Holder;
  let schemaOid: number | undefined;
  try {
    // A damaged file is refused before this daemon is registered or claims anything.
    stores.sqlite?.quickCheck();
    const { multipleHosts } = (await store.info()).capabilities;
    schemaOid = await stores.schemaOid?.();
    // A beat that finds the store replaced (on PostgreSQL, the schema made anew) stops the daemon.
    holder = await startHolder({ runs, agent, threads, leaseMs, log: quiet, multiHost: multipleHosts, silentMs: opts.silentMs, fatal: stopsOn });
  } catch (err) {
    await store.close();
    throw err;
  }
  const { id } = holder;
  const perThread = Math.ceil(concurrency / threads);
  const config: WorkerConfig = {
    dbPath: opts.dbPath,
    poolSize: poolSizeFor(perThread),
    ...(schemaOid === undefined ? {} : { schemaOid }),
    durability: opts.durability ?? 'normal',
    daemonId: id,
    toolModules,
    plugins,
    writeLock,
    breaker: { ...DEFAULT_BREAKER, ...opts.breaker },
    claim: { agent, capabilities, queue, leaseMs },
    ...(opts.maxRunMs === undefined ? {} : { maxRunMs: opts.maxRunMs }),
    perThread,
    concurrency,
    seats: createSeats(threads),
  };

  let stopping = false;

  const fatal = (err: EngineError): void => {
    if (latch.offer(err)) void stop(FATAL_GRACE_MS);
  };
  /** For a reporter (faultReporter's `fatal`): a fault no retry mends stops the daemon. */
  function stopsOn(err: unknown): boolean {
    if (!isFatal(err)) return false;
    fatal(err);
    return true;
  }
  stores.sqlite?.onFault(fatal);

  const pool: Pool = createPool({
    threads,
    config,
    onError: (err) => (isFatal(err) ? fatal(err) : log(`worker thread error: ${describeError(err)}`)),
  });

  /**
   * A job's reporter: a fault no retry mends (FATAL_FAULTS: the store replaced, corrupt, its
   * schema gone) stops the daemon, as it does when a thread meets it; others are retried. On
   * SQLite the store's own onFault hook says so too; on PostgreSQL this is how the main
   * thread's jobs (and its heartbeat, through the holder's `fatal`) tell, not only a thread's
   * next claim.
   */
  const jobReport = (what: string): FaultReporter => faultReporter(what, quiet, undefined, stopsOn);

  const sweep = async () => {
    const swept = await tm.sweep();
    const line = describeSweep(swept);
    if (line !== undefined) log(line);
  };
  /** A sweep out of its schedule; a failure is left to the scheduled one. */
  const sweepNow = () => sweep().catch(() => undefined);

  // Backoff after failures: a timer that only stop() cuts short (a commit must not, unlike nap).
  const halt = new AbortController();
  const pause = (ms: number) => sleep(ms, undefined, { signal: halt.signal }).catch(() => undefined);

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
        await pause(retryDelayMs(failures));
      }
    }
    await sweepNow();
    await pause((opts.sweepGraceMs ?? 1000) + 50);
    if (!stopping) await sweepNow();
  };

  /** How a run on a thread ended, from the thread: logged, and its slot freed (its lease let go after a store fault). */
  const ended = (slot: string, ending: RunEnding): void => {
    holder.free(slot);
    if (ending.type === 'ran') {
      log(`task ${ending.taskId} run ${ending.runId}: ${ending.phase} (${ending.stopReason})`);
    } else if (ending.type === 'failed') {
      // Whatever the run held comes back through the sweep once its lease is let go.
      log(`worker ${slot} failed: ${ending.error.message} (task ${ending.taskId}; its lease is let go)`);
      void letGo(slot);
    } else if (FATAL_FAULTS.has(ending.error.code)) {
      fatal(EngineError.from(ending.error));
    } else if (isStoreFault(ending.error.code)) {
      // The run stopped at a write that failed (it rolled back): give the task back soon.
      log(`task ${ending.taskId}: run cut short: ${ending.error.code}: ${ending.error.message}; its lease is let go`);
      void letGo(slot);
    } else {
      log(`task ${ending.taskId}: claim lost (${ending.error.code}): ${ending.error.message}`);
    }
  };

  /**
   * One thread's serving, for the daemon's life: the thread claims and runs (worker-serve.ts)
   * and says over its port what it holds, so the heartbeat renews those leases. A thread that
   * dies (an uncaught exception in a tool; piscina replaces it) or fails to set up is asked
   * again after a backoff (one log line per streak); the leases of what it held are let go,
   * so the sweep gives those tasks back soon.
   */
  const serveThread = async (thread: number): Promise<void> => {
    const report = faultReporter(`worker thread ${thread}`, quiet);
    for (let generation = 0; !stopping; generation++) {
      const { port1, port2 } = new MessageChannel();
      const held = new Map<string, number>();
      let lastNote!: () => void;
      const served = new Promise<void>((resolve) => (lastNote = resolve));
      const heard = (n: ThreadNote): void => {
        if (n.type === 'ready') report.ok();
        else if (n.type === 'held') {
          holder.hold(n.slot);
          held.set(n.slot, n.taskId);
        } else if (n.type === 'ended') {
          held.delete(n.slot);
          ended(n.slot, n.ending);
        } else if (n.type === 'log') quiet(n.line);
        else if (n.type === 'fault') fatal(EngineError.from(n.error));
        else lastNote();
      };
      port1.on('message', (notes: ThreadNote[]) => notes.forEach(heard));
      try {
        await pool.serve({ type: 'serve', thread, generation, port: port2 });
        // The reply travels on piscina's port: the thread's last notes may still be on theirs.
        await Promise.race([served, sleep(1000)]);
        port1.close();
      } catch (err) {
        // A dead thread's last notes may still be queued: read them, then hear no more (a
        // note read after the walk below would renew a lease no run holds).
        await sleep(20);
        port1.close();
        // What it held of the daemon's limits is free again (piscina starts a new thread).
        releaseThread(config.seats, thread);
        // Threads still busy when the grace ran out: stop() lets go of their leases itself.
        if (stopping) return;
        if (isFatal(err)) return fatal(err);
        for (const [slot, taskId] of held) {
          quiet(`worker ${slot} failed: ${describeError(err)} (task ${taskId}; its lease is let go)`);
          holder.free(slot);
          void letGo(slot);
        }
        report.failed(err);
        await pause(retryDelayMs(report.failures));
      }
    }
  };
  const serving = Array.from({ length: threads }, (_, thread) => serveThread(thread));

  const scheduleReports = new Map<number, FaultReporter>();
  let nextCompactAt = 0;
  const jobs: Job[] = [];
  jobs.push(
    repeat(opts.deadCheckMs ?? 250, 5000, async () => {
      const reclaimed = await holder.reclaimGone();
      if (reclaimed.length > 0) {
        log(`reclaimed tasks ${reclaimed.join(', ')} from a daemon that is gone`);
      }
    }, jobReport('dead-daemon check')),
    cronWithBackoff(opts.sweepCron ?? '*/5 * * * * *', async () => {
      await sweep();
      const expired = await runs.expireApprovals();
      if (expired.length > 0) log(`approvals ${expired.join(', ')} expired`);
      if (opts.retainMs !== undefined && Date.now() >= nextCompactAt) {
        const compacted = await runs.compact((await store.clock()) - opts.retainMs);
        if (compacted > 0) log(`retention: compacted the history of ${compacted} finished tasks`);
        // A backlog goes a batch a pass; a pass that found nothing waits a while (retentionIdleMs).
        nextCompactAt = compacted > 0 ? 0 : Date.now() + retentionIdleMs(opts.retainMs);
      }
    }, jobReport('sweep')),
    cronWithBackoff(opts.schedulerCron ?? '* * * * * *', async () => {
      // Fire times by the store's clock: on PostgreSQL every daemon's scheduler agrees on it.
      const { created, skipped, failed } = await runSchedulerTick(schedules, await store.clock());
      if (created.length > 0) log(`scheduler: created tasks ${created.join(', ')}`);
      if (skipped.length > 0) log(`scheduler: skipped ${skipped.length} fire(s) that would overlap`);
      // A store fault (a full disk, the server away) is the whole tick's: the job backs off.
      const fault = failed.find((f) => isEngineError(f.error) && isStoreFault(f.error.code));
      if (fault !== undefined) throw fault.error;
      // Otherwise one line per schedule's streak (faultReporter), not one a second.
      const failing = new Set(failed.map((f) => f.scheduleId));
      for (const [scheduleId, report] of scheduleReports) {
        if (failing.has(scheduleId)) continue;
        report.ok();
        scheduleReports.delete(scheduleId);
      }
      for (const f of failed) {
        if (!scheduleReports.has(f.scheduleId)) scheduleReports.set(f.scheduleId, faultReporter(`scheduler: schedule ${f.scheduleId}`, quiet));
        scheduleReports.get(f.scheduleId)!.failed(f.error);
      }
    }, jobReport('scheduler')),
  );

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let stopping$: Promise<void> | undefined;

  const stop = (graceMs = 10_000): Promise<void> => {
    stopping$ ??= (async () => {
      stopping = true;
      halt.abort();
      for (const j of jobs) j.stop();
      drainSeats(config.seats);
      const channel = new BroadcastChannel(channelName(id));
      channel.postMessage({ type: 'drain' } satisfies DaemonBroadcast);
      const drained = Promise.all(serving).then(() => true);
      const inTime = await Promise.race([drained, new Promise<false>((r) => setTimeout(() => r(false), graceMs).unref())]);
      channel.close();
      latch.tell();
      if (!inTime) log(`grace period of ${graceMs} ms over; stopping the threads that are still busy`);
      // Leases of anything still held are let go now, so another daemon takes over at once.
      // Each slot leaves the holder first: a beat meanwhile would renew a lease just expired.
      for (const s of holder.busy()) {
        holder.free(s);
        await runs.expireSlot(s).catch(() => undefined);
      }
      await pool.destroy();
      await holder.stop();
      await tm.close();
      resolveStopped();
    })();
    return stopping$;
  };

  log(`daemon ${id} started: ${threads} workers, up to ${concurrency} runs in flight, as ${agent} on queue ${queue}, database ${redactUrl(opts.dbPath)}`);
  // Past MAX_LOOKED_UP a claim walks the tasks requiring capabilities (claim-needs.ts): said once, at start.
  if (claimWalks(capabilities)) {
    log(`warning: ${new Set(capabilities).size} capabilities offered: past ${MAX_LOOKED_UP}, each claim walks the tasks that require capabilities in claim order, so tasks requiring one this daemon lacks (any agent can create them) slow every claim; offer ${MAX_LOOKED_UP} or fewer`);
  }
  return {
    id,
    tm,
    runs,
    stop,
    stopped,
    get fault() {
      return latch.fault;
    },
  };
}
