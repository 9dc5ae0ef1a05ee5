/**
 * A write lock shared by the threads of one process (a SharedArrayBuffer handed to each
 * worker). SQLite lets one writer in at a time; threads that race for its lock sleep in the
 * busy handler in steps of a millisecond or more while the holder needs tens of
 * microseconds. Queuing on this lock first, a thread wakes the moment the previous writer of
 * its process is done. Processes still meet at SQLite's own lock.
 */

/**
 * A new lock for the threads of this process to share. Its second cell is the threads' fault
 * flag: a store that stops writing for a fault of the file raises it, and every other store
 * sharing the lock stops before its next transaction (see task-store.ts), instead of writing
 * on until its own guard looks at the file.
 */
export function createWriteLock(): Int32Array {
  // [0] the lock, [1] the fault flag, [2] a store of the process runs the checkpointer,
  // [3] commits by the stores of the process (for that one checkpointer).
  return new Int32Array(new SharedArrayBuffer(16));
}

/** Counts a commit for the process's one checkpointer (see checkpointer.ts). */
export function countCommit(lock: Int32Array | undefined): void {
  if (lock !== undefined && lock.length > 3) Atomics.add(lock, 3, 1);
}

/**
 * Whether this store may start the process's checkpointer: true for the first store that
 * asks (or for a store without a shared lock); the others' commits are counted for it.
 */
export function claimCheckpointer(lock: Int32Array | undefined): boolean {
  return lock === undefined || lock.length <= 3 || Atomics.compareExchange(lock, 2, 0, 1) === 0;
}

/** Fault flag values: no fault, the file was replaced, the file is corrupt. */
export const SHARED_FAULT = { none: 0, replaced: 1, corrupt: 2 } as const;

export function raiseSharedFault(lock: Int32Array | undefined, kind: 1 | 2): void {
  if (lock !== undefined && lock.length > 1) Atomics.compareExchange(lock, 1, 0, kind);
}

export function sharedFault(lock: Int32Array | undefined): number {
  return lock !== undefined && lock.length > 1 ? Atomics.load(lock, 1) : 0;
}

/** A holder that never lets go (a thread terminated mid-write) is presumed dead after this. */
const STEAL_AFTER_MS = 5000;

/** Takes the lock if it is free; never waits. */
export function tryWriteLock(lock: Int32Array): boolean {
  return Atomics.compareExchange(lock, 0, 0, 1) === 0;
}

export function releaseWriteLock(lock: Int32Array): void {
  Atomics.store(lock, 0, 0);
  // Everyone waiting looks again: a blocked waiter and the async ones (whenUnlocked).
  Atomics.notify(lock, 0);
}

/**
 * Resolves once the lock is free (or its holder is presumed dead and the lock taken from it),
 * without blocking the thread: a daemon thread's other runs go on meanwhile.
 */
export async function whenUnlocked(lock: Int32Array): Promise<void> {
  const started = Date.now();
  // Atomics.waitAsync keeps no event loop alive: a thread whose only work was this wait
  // would end silently, its write never made. A timer keeps it alive while it waits.
  const alive = setInterval(() => undefined, STEAL_AFTER_MS);
  try {
    while (Atomics.load(lock, 0) !== 0) {
      const waited = Atomics.waitAsync(lock, 0, 1, 5);
      if (waited.async) await waited.value;
      if (Date.now() - started > STEAL_AFTER_MS) {
        Atomics.store(lock, 0, 0);
        return;
      }
    }
  } finally {
    clearInterval(alive);
  }
}

/** Runs `fn` holding the lock, waiting for it (blocking the thread) when another thread holds it. */
export function withWriteLock<T>(lock: Int32Array | undefined, fn: () => T): T {
  if (lock === undefined) return fn();
  const started = Date.now();
  while (!tryWriteLock(lock)) {
    Atomics.wait(lock, 0, 1, 5);
    if (Date.now() - started > STEAL_AFTER_MS) {
      Atomics.store(lock, 0, 1);
      break;
    }
  }
  try {
    return fn();
  } finally {
    releaseWriteLock(lock);
  }
}
