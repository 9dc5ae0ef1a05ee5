/**
 * A write lock shared by the threads of one process (a SharedArrayBuffer handed to each
 * worker). SQLite lets one writer in at a time; threads that race for its lock sleep in the
 * busy handler in steps of a millisecond or more while the holder needs tens of
 * microseconds. Queuing on this lock first, a thread wakes the moment the previous writer of
 * its process is done. Processes still meet at SQLite's own lock.
 */

/** A new lock for the threads of this process to share. */
export function createWriteLock(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(4));
}

/** A holder that never lets go (a thread terminated mid-write) is presumed dead after this. */
const STEAL_AFTER_MS = 5000;

export function withWriteLock<T>(lock: Int32Array | undefined, fn: () => T): T {
  if (lock === undefined) return fn();
  const started = Date.now();
  while (Atomics.compareExchange(lock, 0, 0, 1) !== 0) {
    Atomics.wait(lock, 0, 1, 5);
    if (Date.now() - started > STEAL_AFTER_MS) {
      Atomics.store(lock, 0, 1);
      break;
    }
  }
  try {
    return fn();
  } finally {
    Atomics.store(lock, 0, 0);
    Atomics.notify(lock, 0, 1);
  }
}
