/**
 * Waiting for SQLite's write lock without SQLite's busy handler. A store connection runs
 * with `busy_timeout = 0`: the busy handler sleeps 1, 2, 5, 10 … 100 ms between tries,
 * so a caller whose lock is free microseconds later slept milliseconds, and between
 * processes the one that just committed won again and again (one process of four took 94%
 * of a drain). Here a caller that finds the lock taken tries again after a short, jittered,
 * growing wait — about 0.1 ms, then up to 1 ms — for a few milliseconds, blocking only its
 * own thread; past that it waits asynchronously (connection.ts: retryBusy) so the thread's
 * other runs go on. Jitter keeps processes from retrying in lockstep.
 */
import { EngineError } from '../errors.js';
import { isBusyError } from './connection.js';

/** How long a write tries synchronously before it waits asynchronously. */
export const WRITE_SPIN_MS = 5;
/** How long a read retries (reads meet the lock only while the WAL index is rebuilt). */
const READ_RETRY_MS = 5000;

const cell = new Int32Array(new SharedArrayBuffer(4));

/** A jittered wait of about 0.02 · 2^attempt ms, at most ~1.5 ms. */
function shortWait(attempt: number): void {
  const ms = Math.min(1, 0.02 * 2 ** Math.min(attempt, 6)) * (0.5 + Math.random());
  Atomics.wait(cell, 0, 0, ms);
}

/** Runs `fn`; on SQLITE_BUSY tries again after short waits until `spinMs` have passed, then rethrows. */
export function spinOnBusy<T>(fn: () => T, spinMs = WRITE_SPIN_MS): T {
  const started = performance.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err) || performance.now() - started > spinMs) throw err;
      shortWait(attempt);
    }
  }
}

/** A read, retried while the database is busy; STORE_BUSY after READ_RETRY_MS. */
export function readOnBusy<T>(fn: () => T, what: string): T {
  try {
    return spinOnBusy(fn, READ_RETRY_MS);
  } catch (err) {
    if (!isBusyError(err)) throw err;
    throw new EngineError('STORE_BUSY', `${what}: the database stayed locked for ${READ_RETRY_MS} ms`);
  }
}
