/**
 * The one lease-renewal mechanism for everything a process holds. A holder is a row in the
 * daemons registry (`workers` table): the daemon is one, and so is an HTTP server hosting
 * stream-owned runs. Every claim it makes names a slot of its own (`<holder id>/<n>`); one
 * write per beat renews the holder's heartbeat and the leases of all its busy slots, however
 * many runs are in flight. A holder whose process is gone is recognised by its peers on the
 * same host (reclaimDeadDaemons: the slot range `<id>/…` is reclaimed at once). On a store
 * that several machines share (PostgreSQL), a pid says nothing about another machine: there a
 * holder beats at least every `silentMs / 3`, and one silent for `silentMs` in the database's
 * clock is taken for dead by its peers on any host (reclaimSilentDaemons). Its own late
 * writes are refused by the fence; when it beats again it registers anew.
 *
 * The host is `TASKLOOP_HOST` when set (containers whose hostnames collide; tests that play
 * several machines on one), else the machine's hostname.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { type RunStore, faultReporter } from '../engine/index.js';
import { repeat } from './backoff.js';

export interface Holder {
  readonly id: string;
  readonly host: string;
  /** A fresh slot id: claim with it as `workerId`, and its lease is renewed until `free`. */
  take(): string;
  /** A slot named elsewhere (a daemon's thread claims with `<holder id>/<thread>.<n>`): renewed until `free`. */
  hold(slotId: string): void;
  free(slotId: string): void;
  /** The slots in use now. */
  busy(): string[];
  /** Reclaims what holders that are gone held (dead pids on this host; silent holders anywhere, on a shared store); returns the task ids. */
  reclaimGone(): Promise<number[]>;
  /** Stops the beats and removes the holder from the registry (its leases stay as they are). */
  stop(): Promise<void>;
}

export interface HolderOptions {
  runs: RunStore;
  agent: string;
  /** Worker threads the holder runs (0 for a process that runs loops on its own thread). */
  threads: number;
  leaseMs: number;
  /** One line per streak of failed heartbeats. @defaultValue none */
  log?: (line: string) => void;
  /**
   * Called after each beat that was written, e.g. to look whether what the holder's slots
   * hold is still theirs (a lease that ran out while the process was stalled). Must not throw.
   * @defaultValue none
   */
  onBeat?: () => void;
  /**
   * The store is shared by several machines (StoreInfo.capabilities.multipleHosts): peers
   * judge holders by their heartbeats, not their pids. @defaultValue false
   */
  multiHost?: boolean;
  /**
   * On a shared store, how long a holder may be silent before its peers take it for dead.
   * 4 s: a killed daemon's runs resume elsewhere within 5 s (the silence, less the time since
   * its last beat, plus a peer's 250 ms check; `npm run bench:pg` measures it), and a holder
   * whose event loop stalls for over 2.6 s (beats every 1.3 s) is taken for dead, and registers
   * again at its next beat. @defaultValue 4000
   */
  silentMs?: number;
  /**
   * Called with a beat's failure before it is logged and retried; true when the caller takes
   * it as the end (a fault no retry mends, such as STORE_REPLACED), and then it is not logged.
   * @defaultValue none: every failure is retried
   */
  fatal?: (err: unknown) => boolean;
}

/** The host a holder says it runs on: TASKLOOP_HOST, else the hostname. */
export function holderHost(): string {
  const given = process.env.TASKLOOP_HOST;
  return given !== undefined && given !== '' ? given : hostname();
}

/** Whether a process on this host lives (EPERM: it does, under another user): how peers judge a holder's pid. */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Registers the holder, then beats every third of the lease. */
export async function startHolder(opts: HolderOptions): Promise<Holder> {
  const host = holderHost();
  const id = `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const row = { id, host, pid: process.pid, agent: opts.agent, threads: opts.threads };
  await opts.runs.registerDaemon(row);
  const silentMs = opts.silentMs ?? 4000;
  const slots = new Set<string>();
  let next = 0;
  // A third of the lease, so two beats may fail before a lease runs out; never more often
  // than every 30 ms (a lease is at least 100 ms).
  const beatMs = Math.max(30, Math.floor(Math.min(opts.leaseMs, opts.multiHost === true ? silentMs : Infinity) / 3));
  const beat = async () => {
    // Only an owner that stops on a replaced store asks the beat to check for one (see fatal).
    if (!(await opts.runs.heartbeatDaemon(id, [...slots], { sameStore: opts.fatal !== undefined }))) {
      // Its peers found this holder silent (a stall, a partition) and took its tasks back:
      // its runs' next writes are refused by the fence. It goes on, registered anew.
      opts.log?.(`holder ${id} was taken for dead by its peers (silent over ${silentMs} ms); its tasks were reclaimed; registering again`);
      await opts.runs.registerDaemon(row);
    }
    opts.onBeat?.();
  };
  const job = repeat(beatMs, 5000, beat, faultReporter('heartbeat', opts.log ?? (() => undefined), undefined, opts.fatal));
  return {
    id,
    host,
    take() {
      const slot = `${id}/${next++}`;
      slots.add(slot);
      return slot;
    },
    hold: (slot) => void slots.add(slot),
    free: (slot) => void slots.delete(slot),
    busy: () => [...slots],
    async reclaimGone() {
      const dead = await opts.runs.reclaimDeadDaemons(host, id, pidAlive);
      if (opts.multiHost !== true) return dead;
      return [...dead, ...(await opts.runs.reclaimSilentDaemons(id, silentMs))];
    },
    async stop() {
      job.stop();
      await opts.runs.unregisterDaemon(id).catch(() => undefined);
    },
  };
}
