/** The typed messages between the daemon's main thread and its worker threads. */
import type { ClaimedTask, OpenRunResult, SerializedError } from '../engine/index.js';

export interface WorkerConfig {
  /** The database: a SQLite file's path or a postgres:// URL. */
  dbPath: string;
  /** PostgreSQL: connections in each thread's pool (from the runs in flight per thread). */
  poolSize: number;
  durability: 'normal' | 'full';
  daemonId: string;
  /** Extra tool modules (paths or specifiers), loaded in every thread; each exports `tools`. */
  toolModules: string[];
  breaker: { threshold: number; cooldownMs: number; probeTimeoutMs: number };
  /** The write lock the daemon's threads share (a SharedArrayBuffer travels shared). */
  writeLock: Int32Array;
  /** Plugins loaded in every thread, in order. */
  plugins: Array<{ module: string; options?: Record<string, unknown> }>;
}

/**
 * A task the main thread claimed (with its run opened in the same transaction), for a thread
 * to run. A thread runs many at once: each is one async loop, waiting costs no thread.
 */
export type WorkerRequest = { type: 'run'; slotId: string; task: ClaimedTask; opened: OpenRunResult };

export type WorkerReply =
  | { type: 'ran'; taskId: number; runId: number; phase: string; stopReason: string }
  | { type: 'lost'; taskId: number; error: SerializedError };

/** Broadcast from the main thread to every worker of one daemon. */
export type DaemonBroadcast = { type: 'drain' };

export const channelName = (daemonId: string) => `taskloop:daemon:${daemonId}`;
