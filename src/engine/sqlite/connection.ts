/**
 * Opening a SQLite file the way every taskloop connection must: WAL, busy_timeout,
 * foreign keys, the chosen durability, migrations applied. One connection per thread.
 * This is the only module besides the SQLite adapters that imports better-sqlite3.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { EngineError } from '../errors.js';
import { migrate } from './migrations.js';

export type Db = Database.Database;

const WAL_AUTOCHECKPOINT_BYTES = 16 * 1024 * 1024;
export type Durability = 'normal' | 'full';

export interface OpenOptions {
  /** Path of the database file; created with its folder when missing. */
  path: string;
  /** `normal` (synchronous=NORMAL: a power loss may lose the last commits, never corrupt) or `full`. @defaultValue 'normal' */
  durability?: Durability;
  /** How long one statement waits for the write lock before SQLITE_BUSY. @defaultValue 5000 */
  busyTimeoutMs?: number;
  readonly?: boolean;
}

const BUSY_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_LOCKED']);

export function isBusyError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && BUSY_CODES.has(code);
}

/** Runs `fn` again on SQLITE_BUSY with jittered exponential backoff; other errors pass. */
export async function retryBusy<T>(fn: () => T, what: string, maxWaitMs = 60_000): Promise<T> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err)) throw err;
      if (Date.now() - started > maxWaitMs) {
        throw new EngineError('STORE_BUSY', `${what}: the database stayed locked for ${maxWaitMs} ms; nothing was written`);
      }
      const cap = Math.min(200, 2 ** Math.min(attempt, 8));
      await sleep(1 + Math.random() * cap);
    }
  }
}

/** Synchronous variant for start-up paths that cannot await (opening, migrating). */
function retryBusySync<T>(fn: () => T, maxWaitMs = 60_000): T {
  const started = Date.now();
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err) || Date.now() - started > maxWaitMs) throw err;
      Atomics.wait(cell, 0, 0, 1 + Math.random() * Math.min(100, 2 ** attempt));
    }
  }
}

export function openDatabase(opts: OpenOptions): Db {
  if (!opts.readonly && opts.path !== ':memory:') mkdirSync(dirname(opts.path), { recursive: true });
  const db = new Database(opts.path, { readonly: opts.readonly ?? false });
  try {
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    // 1 KiB pages (applies when this call creates the file; an existing file keeps its own).
    // A commit writes one WAL frame per page it changed, and a task's two transactions change
    // about ten pages, each by a few dozen bytes: with 4 KiB pages most of the bytes written,
    // checksummed and synced at checkpoints were untouched content. Measured on the queue
    // bench: 1 KiB drains ~10% faster than 2 KiB and ~35% faster than 4 KiB. The price is
    // deeper b-trees (4 levels instead of 3 at a million tasks, still cached) and more
    // overflow pages for big cards.
    const file = opts.path !== ':memory:'; // an in-memory database is all page cache: keep its defaults
    if (file && !opts.readonly) db.pragma('page_size = 1024');
    // Several processes may open a fresh file at once: switching to WAL can hit SQLITE_BUSY.
    if (!opts.readonly) retryBusySync(() => db.pragma('journal_mode = WAL'));
    db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('foreign_keys = ON');
    // The inline checkpoint is only the backstop of the background checkpointer (see
    // startCheckpointer): at 16 MiB of WAL instead of SQLite's 1000 pages (1 MiB here), so
    // the commit that runs it is rare (well under 0.1% of a task's commits) and finds little
    // left to copy. Without the checkpointer this is also the checkpoint interval: fewer,
    // larger checkpoints copy each hot page once per checkpoint instead of many times.
    db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_BYTES / (db.pragma('page_size', { simple: true }) as number)}`);
    // No mmap_size: it halves a million-task stats() (fewer pread calls), but every fetch
    // of a mapped page then looks the page up in the WAL index again, and the queue drain
    // measured ~4% slower with it. No temp_store either: no hot statement builds a temporary
    // b-tree (findTasks merges per-state pages in JS instead of sorting), and those that do
    // (the sweep's ORDER BY over the few leased tasks) stay in memory at this size anyway.
    // A 1 MiB page cache instead of this build's 16 MiB default: the pages a claim or a move
    // touches (a few root-to-leaf paths and the right edge of the event log) fit many times
    // over, and at the commit after any b-tree rebalance SQLite scans the cache's whole hash
    // table (it re-keys pages through the page number past the lock byte), so a big cache
    // makes those commits slower. Measured: 1 MiB drains 5-10% faster than 2 or 4 MiB (the
    // machine is noisy). The OS page cache still holds the file for bigger reads.
    if (file) db.pragma('cache_size = -1000');
    if (!opts.readonly) retryBusySync(() => migrate(db));
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** The `PRAGMA data_version` of this connection: it changes when another connection commits. */
export function dataVersion(db: Db): number {
  return db.pragma('data_version', { simple: true }) as number;
}

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
 * finds little left to copy and sync before restarting it.
 */
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
let db;
try {
  db = new Database(workerData.path, { fileMustExist: true });
  db.pragma('busy_timeout = 0');
  db.pragma('synchronous = ' + workerData.synchronous);
  let seen = -1;
  let wait = workerData.minMs;
  while (Atomics.load(cell, 0) === 0) {
    const commits = Atomics.load(cell, 1);
    if (commits !== seen) {
      seen = commits;
      wait = workerData.minMs;
      try {
        // Close to the backstop, keep the uncopied tail short: the writer's inline checkpoint
        // there has only that tail left to copy and sync before it restarts the WAL.
        const [r] = db.pragma('wal_checkpoint(PASSIVE)');
        if (r.log >= workerData.hurryFrames) wait = 1;
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
 * at most every `minMs` while commits arrive, and backs off to `maxMs` when idle.
 */
export function startCheckpointer(
  path: string,
  durability: Durability | undefined,
  backstopFrames: number,
  minMs = 10,
  maxMs = 1000,
): Checkpointer {
  const cell = new Int32Array(new SharedArrayBuffer(8)); // [0] stop flag, [1] commit counter
  const worker = new Worker(CHECKPOINTER, {
    eval: true,
    workerData: {
      driver: createRequire(import.meta.url).resolve('better-sqlite3'),
      path,
      synchronous: durability === 'full' ? 'FULL' : 'NORMAL',
      cell: cell.buffer,
      minMs,
      maxMs,
      hurryFrames: Math.floor(backstopFrames / 2),
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
