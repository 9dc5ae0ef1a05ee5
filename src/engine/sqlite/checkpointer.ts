/**
 * Background WAL checkpoints. With SQLite's default, the commit that takes the WAL past its
 * threshold runs the checkpoint inline: it copies the WAL back and fsyncs twice while the
 * caller waits, which is what put ~1% of claims at 2–4 ms. The checkpointer runs PASSIVE
 * checkpoints from a worker thread with its own connection instead: they never block
 * writers or readers, and their fsyncs (and the kernel's writeback of the WAL) happen off
 * the thread that serves the engine. The connection's own auto-checkpoint stays on as the
 * backstop: a passive checkpoint can copy the WAL back but only a writer can restart it
 * from the beginning, and only once everything is copied, so under a continuous stream of
 * commits the WAL reaches wal_autocheckpoint and the writer's inline checkpoint then
 * finds little left to copy and sync before restarting it: at most the commits of the
 * checkpointer's last interval.
 *
 * Measured and removed: checkpointing every millisecond once the WAL was half way to the
 * backstop (to shorten that tail further). Under a steady drain the WAL restarts only at
 * the backstop, so that mode ran half the time: a daemon's checkpointer took 3.7–4.1 s of
 * CPU for 3,000 one-tool tasks with it and 1.2–1.3 s without, for a tail of 10 ms of
 * commits instead of 1 ms once per 16 MiB of WAL.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Durability } from './connection.js';

export interface Checkpointer {
  /** Tells the worker that this process committed; it checkpoints soon after. Cheap (one atomic add). */
  noteCommit(): void;
  /** Stops the worker and waits until its connection is closed. */
  close(): Promise<void>;
}

const CHECKPOINTER = `
const { workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const cell = new Int32Array(workerData.cell);
// Commits of every store of the process that share its write lock (cell 3), or of the one store.
const shared = workerData.shared === undefined ? undefined : new Int32Array(workerData.shared);
const commitCount = () => (shared === undefined ? Atomics.load(cell, 1) : Atomics.load(shared, 3));
let db;
try {
  db = new Database(workerData.path, { fileMustExist: true });
  db.pragma('busy_timeout = 0');
  db.pragma('synchronous = ' + workerData.synchronous);
  let seen = -1;
  let wait = workerData.minMs;
  while (Atomics.load(cell, 0) === 0) {
    const commits = commitCount();
    if (commits !== seen) {
      seen = commits;
      wait = workerData.minMs;
      try {
        db.pragma('wal_checkpoint(PASSIVE)');
      } catch {}
    } else {
      wait = Math.min(wait * 2, workerData.maxMs);
    }
    Atomics.wait(cell, 0, 0, wait);
  }
} catch {
} finally {
  if (db !== undefined && db.open) db.close();
}
`;

/**
 * Starts the checkpointer of the file at `path` (a WAL database that exists). It checkpoints
 * at most every `minMs` while commits arrive, and backs off to `maxMs` when idle. With
 * `shared` (a process's write lock, see write-lock.ts), it counts the commits of every store
 * of the process: one checkpointer serves all of them.
 */
export function startCheckpointer(
  path: string,
  durability: Durability | undefined,
  minMs = 10,
  maxMs = 1000,
  shared?: Int32Array,
): Checkpointer {
  const cell = new Int32Array(new SharedArrayBuffer(8)); // [0] stop flag, [1] commit counter
  const worker = new Worker(CHECKPOINTER, {
    eval: true,
    workerData: {
      driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      path,
      synchronous: durability === 'full' ? 'FULL' : 'NORMAL',
      cell: cell.buffer,
      shared: shared?.buffer,
      minMs,
      maxMs,
    },
    stdout: false,
    stderr: false,
  });
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  worker.on('error', () => {}); // a failed checkpointer leaves the inline auto-checkpoint in charge
  worker.unref();
  return {
    noteCommit() {
      Atomics.add(cell, 1, 1);
    },
    async close() {
      Atomics.store(cell, 0, 1);
      Atomics.notify(cell, 0);
      worker.ref(); // keep the event loop alive until the worker is gone
      await exited;
    },
  };
}
