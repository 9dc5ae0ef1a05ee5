/**
 * The daemon: a pool of worker threads that claim and run tasks, and the main thread's
 * duties — waking idle workers when any process commits, one heartbeat write per beat for
 * the whole daemon, recognising dead daemons on this host at once, the stale sweep on a
 * cron schedule, the scheduler, and a graceful shutdown that releases what it holds.
 */
import { hostname } from 'node:os';
import { BroadcastChannel } from 'node:worker_threads';
import { randomBytes } from 'node:crypto';
import {
  type RunStore,
  type SqliteTaskStore,
  type TaskManager,
  createSqliteRunStore,
  createSqliteScheduleStore,
  createSqliteStore,
  createTaskManager,
  createWriteLock,
} from '../engine/index.js';
import { type Job, every } from './cron.js';
import { runSchedulerTick } from './scheduler.js';
import { type Pool, createPool } from './pool.js';
import { type DaemonBroadcast, type WorkerConfig, channelName } from './protocol.js';

export interface DaemonOptions {
  dbPath: string;
  /** @defaultValue 'normal' */
  durability?: 'normal' | 'full';
  /** Worker threads. @defaultValue 2 */
  workers?: number;
  /** The agent name the threads claim as. @defaultValue `daemon-<host>-<pid>` */
  agent?: string;
  capabilities?: string[];
  /** @defaultValue 'default' */
  queue?: string;
  /** @defaultValue 30000 */
  leaseMs?: number;
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
  /** How often to look for dead daemons on this host. @defaultValue 250 */
  deadCheckMs?: number;
  /** One line per notable thing. @defaultValue no logging */
  log?: (line: string) => void;
}

export interface Daemon {
  readonly id: string;
  readonly tm: TaskManager;
  readonly runs: RunStore;
  /** Stops claiming, lets in-flight steps finish within `graceMs`, releases leases, closes. */
  stop(graceMs?: number): Promise<void>;
  /** Resolves when the daemon has stopped. */
  readonly stopped: Promise<void>;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function startDaemon(opts: DaemonOptions): Promise<Daemon> {
  const log = opts.log ?? (() => undefined);
  const host = hostname();
  const id = `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const threads = opts.workers ?? 2;
  const leaseMs = opts.leaseMs ?? 30_000;
  const writeLock = createWriteLock();
  const store: SqliteTaskStore = createSqliteStore({ path: opts.dbPath, durability: opts.durability, writeLock });
  const tm = createTaskManager({ store, sweepGraceMs: opts.sweepGraceMs });
  const runs = createSqliteRunStore(store);
  const schedules = createSqliteScheduleStore(store);
  const config: WorkerConfig = {
    dbPath: opts.dbPath,
    durability: opts.durability ?? 'normal',
    daemonId: id,
    agent: opts.agent ?? `daemon-${host}-${process.pid}`,
    capabilities: opts.capabilities ?? [],
    queue: opts.queue ?? 'default',
    leaseMs,
    toolModules: opts.toolModules ?? [],
    plugins: opts.plugins ?? [{ module: 'task_enforcer' }],
    writeLock,
    breaker: { threshold: 3, cooldownMs: 300_000, probeTimeoutMs: 60_000, ...opts.breaker },
  };
  await runs.registerDaemon({ id, host, pid: process.pid, agent: config.agent, threads });

  let stopping = false;
  const busy = new Set<string>();
  const waiters = new Set<() => void>();
  const wakeAll = () => {
    for (const w of [...waiters]) w();
  };
  const unwatch = store.watch(wakeAll);
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

  const pool: Pool = createPool({ threads, config, onError: (err) => log(`worker thread error: ${err instanceof Error ? err.message : String(err)}`) });

  const slot = async (slotId: string) => {
    let failures = 0;
    while (!stopping) {
      busy.add(slotId);
      try {
        const reply = await pool.run({ type: 'work', slotId });
        failures = 0;
        busy.delete(slotId);
        if (reply.type === 'idle') await nap(1000);
        else if (reply.type === 'ran') log(`task ${reply.taskId} run ${reply.runId}: ${reply.phase} (${reply.stopReason})`);
        else log(`task ${reply.taskId}: claim lost (${reply.error.code}): ${reply.error.message}`);
      } catch (err) {
        // The thread crashed or failed to load; piscina replaces it. Whatever it held comes
        // back through the sweep once its lease is let go.
        busy.delete(slotId);
        failures++;
        log(`worker ${slotId} failed: ${err instanceof Error ? err.message : String(err)}`);
        await runs.expireSlot(slotId).catch(() => undefined);
        if (failures > 1) await nap(Math.min(5000, 100 * 2 ** failures));
      }
    }
    busy.delete(slotId);
  };
  const slots = Array.from({ length: threads }, (_, i) => slot(`${id}/${i}`));

  const timers: NodeJS.Timeout[] = [];
  const jobs: Job[] = [];
  const guard = (what: string, fn: () => Promise<unknown>) => () =>
    void fn().catch((err: unknown) => log(`${what} failed: ${err instanceof Error ? err.message : String(err)}`));
  timers.push(setInterval(guard('heartbeat', () => runs.heartbeatDaemon(id, [...busy])), Math.max(100, Math.floor(leaseMs / 3))));
  timers.push(
    setInterval(guard('dead-daemon check', async () => {
      const reclaimed = await runs.reclaimDeadDaemons(host, id, pidAlive);
      if (reclaimed.length > 0) {
        log(`reclaimed tasks ${reclaimed.join(', ')} from a daemon that is gone`);
        wakeAll();
      }
    }), opts.deadCheckMs ?? 250),
  );
  jobs.push(
    every(opts.sweepCron ?? '*/5 * * * * *', async () => {
      const swept = await tm.sweep();
      if (swept.requeued.length + swept.failed.length > 0) log(`sweep: requeued ${swept.requeued.join(', ') || '-'}, failed ${swept.failed.join(', ') || '-'}`);
      const expired = await runs.expireApprovals();
      if (expired.length > 0) log(`approvals ${expired.join(', ')} expired`);
      if (opts.retainMs !== undefined) {
        const compacted = await runs.compact(Date.now() - opts.retainMs);
        if (compacted > 0) log(`retention: compacted the history of ${compacted} finished tasks`);
      }
    }, (err) => log(`sweep failed: ${String(err)}`)),
    every(opts.schedulerCron ?? '* * * * * *', async () => {
      const { created, skipped } = await runSchedulerTick(schedules, Date.now());
      if (created.length > 0) log(`scheduler: created tasks ${created.join(', ')}`);
      if (skipped.length > 0) log(`scheduler: skipped ${skipped.length} fire(s) that would overlap`);
    }, (err) => log(`scheduler failed: ${String(err)}`)),
  );

  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));
  let stopping$: Promise<void> | undefined;

  const stop = (graceMs = 10_000): Promise<void> => {
    stopping$ ??= (async () => {
      stopping = true;
      for (const t of timers) clearInterval(t);
      for (const j of jobs) j.stop();
      const channel = new BroadcastChannel(channelName(id));
      channel.postMessage({ type: 'drain' } satisfies DaemonBroadcast);
      wakeAll();
      const drained = Promise.all(slots).then(() => true);
      const inTime = await Promise.race([drained, new Promise<false>((r) => setTimeout(() => r(false), graceMs).unref())]);
      channel.close();
      if (!inTime) log(`grace period of ${graceMs} ms over; stopping the threads that are still busy`);
      // Leases of anything still held are let go now, so another daemon takes over at once.
      for (const s of busy) await runs.expireSlot(s).catch(() => undefined);
      await pool.destroy();
      unwatch();
      await runs.unregisterDaemon(id).catch(() => undefined);
      await tm.close();
      resolveStopped();
    })();
    return stopping$;
  };

  log(`daemon ${id} started: ${threads} workers as ${config.agent} on queue ${config.queue}, database ${opts.dbPath}`);
  return { id, tm, runs, stop, stopped };
}
