/**
 * The typed messages between the daemon's main thread and its worker threads. Each thread
 * claims for itself (worker-serve.ts): the main thread hands it one long `serve` request
 * and hears over the request's port what the thread holds, so that its one heartbeat
 * renews every lease of the daemon and it can let go of what a failed thread held.
 */
import type { MessagePort } from 'node:worker_threads';
import type { SerializedError } from '../engine/index.js';

export interface WorkerConfig {
  /** The database: a SQLite file's path or a postgres:// URL. */
  dbPath: string;
  /** PostgreSQL: connections in each thread's pool (from the runs in flight per thread). */
  poolSize: number;
  /** PostgreSQL: the identity of the schema the main thread opened; a thread opens no other. */
  schemaOid?: number;
  durability: 'normal' | 'full';
  daemonId: string;
  /** Extra tool modules (paths or specifiers), loaded in every thread; each exports `tools`. */
  toolModules: string[];
  breaker: { threshold: number; cooldownMs: number; probeTimeoutMs: number };
  /** The write lock the daemon's threads share (a SharedArrayBuffer travels shared). */
  writeLock: Int32Array;
  /** Plugins loaded in every thread, in order. */
  plugins: Array<{ module: string; options?: Record<string, unknown> }>;
  /** What every thread claims as. */
  claim: { agent: string; capabilities: string[]; queue: string; leaseMs: number };
  /** The longest a run started here may last (DaemonOptions.maxRunMs); none when unset. */
  maxRunMs?: number;
  /** Runs in flight: at most `perThread` on one thread and `concurrency` in the daemon. */
  perThread: number;
  concurrency: number;
  /** Shared by the threads: runs in flight and the exclusive capabilities' holder (seats.ts). */
  seats: Int32Array;
}

/** The one request a thread gets: claim and run until the daemon drains. */
export interface ServeRequest {
  type: 'serve';
  /** The thread's number and this request's generation, part of its slot ids (`<daemon id>/<thread>.<generation>.<n>`): a restarted thread never reuses a slot id. */
  thread: number;
  generation: number;
  /** Where the thread tells the main thread what it holds (ThreadNote[], a batch a message). */
  port: MessagePort;
}

/** A serve request's answer: the thread drained (its `served` note, the last on its port, says so too). */
export interface ServeReply {
  type: 'served';
}

/** How one run on a thread ended. */
export type RunEnding =
  | { type: 'ran'; taskId: number; runId: number; phase: string; stopReason: string }
  | { type: 'lost'; taskId: number; error: SerializedError }
  /** The run threw something that is not an engine error (a bug, a tool that broke the thread's state). */
  | { type: 'failed'; taskId: number; error: SerializedError | { message: string } };

/** From a thread to the main thread, over its serve request's port, in batches (ThreadNote[]). */
export type ThreadNote =
  /** Set up (tools, plugins, store): claiming starts. */
  | { type: 'ready' }
  | { type: 'held'; slot: string; taskId: number }
  | { type: 'ended'; slot: string; ending: RunEnding }
  | { type: 'log'; line: string }
  /** A fault after which nothing may be written (STORE_CORRUPT, STORE_REPLACED). */
  | { type: 'fault'; error: SerializedError }
  /** The last note: every note before it on this port has been delivered (a port keeps its order; the serve reply travels on another). */
  | { type: 'served' };

/** Broadcast from the main thread to every worker of one daemon. */
export type DaemonBroadcast = { type: 'drain' };

export const channelName = (daemonId: string) => `taskloop:daemon:${daemonId}`;

/**
 * Capabilities held by one run at a time in a daemon: a desktop run owns the daemon's X
 * display (its keyboard and pointer). While one runs, the daemon's threads claim without
 * offering them, so other desktop tasks wait for it or go to another daemon (route by
 * capability).
 */
export const EXCLUSIVE_CAPABILITIES: ReadonlySet<string> = new Set(['desktop']);
