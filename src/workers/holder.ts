/**
 * The one lease-renewal mechanism for everything a process holds. A holder is a row in the
 * daemons registry (`workers` table): the daemon is one, and so is an HTTP server hosting
 * stream-owned runs. Every claim it makes names a slot of its own (`<holder id>/<n>`); one
 * write per beat renews the holder's heartbeat and the leases of all its busy slots, however
 * many runs are in flight. A holder whose process is gone is recognised by its peers on the
 * same host (reclaimDeadDaemons: the slot range `<id>/…` is reclaimed at once).
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
  free(slotId: string): void;
  /** The slots in use now. */
  busy(): string[];
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
  const host = hostname();
  const id = `${host}-${process.pid}-${randomBytes(3).toString('hex')}`;
  await opts.runs.registerDaemon({ id, host, pid: process.pid, agent: opts.agent, threads: opts.threads });
  const slots = new Set<string>();
  let next = 0;
  // A third of the lease, so two beats may fail before a lease runs out; never more often
  // than every 30 ms (a lease is at least 100 ms).
  const beatMs = Math.max(30, Math.floor(opts.leaseMs / 3));
  const beat = async () => {
    await opts.runs.heartbeatDaemon(id, [...slots]);
    opts.onBeat?.();
  };
  const job = repeat(beatMs, 5000, beat, faultReporter('heartbeat', opts.log ?? (() => undefined)));
  return {
    id,
    host,
    take() {
      const slot = `${id}/${next++}`;
      slots.add(slot);
      return slot;
    },
    free: (slot) => void slots.delete(slot),
    busy: () => [...slots],
    async stop() {
      job.stop();
      await opts.runs.unregisterDaemon(id).catch(() => undefined);
    },
  };
}
