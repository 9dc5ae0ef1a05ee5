/**
 * The public way to open a store: a SQLite file's path or a `postgres://` URL in, the ports
 * out — TaskManager, RunStore, ScheduleStore — with nothing of the adapters in the types, so
 * a user's declarations never depend on better-sqlite3's or pg's.
 *
 * Any other URL (`file://…`) is refused VALIDATION_FAILED before anything is opened: taken as
 * a file name it would become a folder named `file:`. On PostgreSQL, openStore resolves once
 * the server answered and the schema is migrated, and rejects with the fault otherwise.
 */
import { resolve } from 'node:path';
import { EngineError } from './errors.js';
import type { RunStore } from './run-store.js';
import type { ScheduleStore } from './schedules.js';
import { isDatabaseUrl } from './database-names.js';
import { createStores } from './stores.js';
import { type TaskManager, createTaskManager } from './task-manager.js';

export interface OpenStoreOptions {
  /**
   * The SQLite file (created with its folder unless `readonly`), relative to the working
   * directory, or `:memory:`; or a `postgres://user:password@host:port/db` URL (taskloop's
   * options on it: `schema`, `wakeups=poll`, `pool`; see the README). Other URLs are refused.
   */
  path: string;
  /** `full` syncs every commit to disk; `normal` may lose the last commits on power loss. @defaultValue 'normal' */
  durability?: 'normal' | 'full';
  /** Open for reading only: the file must exist (STORE_NOT_FOUND), writes are refused STORE_READONLY. @defaultValue false */
  readonly?: boolean;
  /** Grace of the stale sweep's second phase (TaskManager.sweep). @defaultValue 1000 */
  sweepGraceMs?: number;
  /** One line for each fault the store deals with itself (a full disk, a failing watcher poll). @defaultValue none */
  log?: (line: string) => void;
}

/** An open store: the same shape as a Daemon's `{ tm, runs }`, so createWorker takes either. */
export interface TaskloopStore {
  /** The absolute path of the file (or `:memory:`), or the URL without its password. */
  readonly path: string;
  /** Tasks: create, claim, move, read, follow the event log. */
  readonly tm: TaskManager;
  /** Runs, steps, controls, breakers, approvals and the daemon liveness registry. */
  readonly runs: RunStore;
  readonly schedules: ScheduleStore;
  /** The fault that stopped this store's writes (STORE_CORRUPT, STORE_REPLACED), if one did. */
  readonly fault: EngineError | undefined;
  /** Calls `listener` once, when a fault stops this store's writes. Returns the unsubscribe function. */
  onFault(listener: (fault: EngineError) => void): () => void;
  /** PRAGMA quick_check, as a daemon runs at start; a damaged file throws STORE_CORRUPT and stops the writes. */
  quickCheck(): void;
  /** Closes the connection (and its file watch). */
  close(): Promise<void>;
}

export { isDatabaseUrl, redactUrl } from './database-names.js';

export async function openStore(opts: OpenStoreOptions): Promise<TaskloopStore> {
  if (typeof opts?.path !== 'string' || opts.path.trim() === '') {
    throw new EngineError('VALIDATION_FAILED', 'openStore: path must be a non-empty string (a SQLite file, or :memory:)');
  }
  if (opts.durability !== undefined && opts.durability !== 'normal' && opts.durability !== 'full') {
    throw new EngineError('VALIDATION_FAILED', `openStore: durability '${String(opts.durability)}' is not normal or full`);
  }
  const database = opts.path === ':memory:' || isDatabaseUrl(opts.path) ? opts.path : resolve(opts.path);
  const stores = createStores({
    database,
    durability: opts.durability,
    readonly: opts.readonly === true,
    ...(opts.log === undefined ? {} : { log: opts.log }),
  });
  try {
    // PostgreSQL: the server reached and the schema migrated, or its fault now (STORE_UNAVAILABLE …).
    await stores.ready;
  } catch (err) {
    await stores.store.close();
    throw err;
  }
  const tm = createTaskManager({ store: stores.store, sweepGraceMs: opts.sweepGraceMs });
  const faults = stores.sqlite;
  return {
    path: stores.location,
    tm,
    runs: stores.runs,
    schedules: stores.schedules,
    get fault() {
      return faults?.fault;
    },
    onFault: (listener) => faults?.onFault(listener) ?? (() => undefined),
    quickCheck: () => faults?.quickCheck(),
    close: () => tm.close(),
  };
}
