/**
 * One way in to every store, for the surfaces (CLI, daemon, worker threads, HTTP server): a
 * database name — a SQLite file path or a `postgres://` URL — in, the ports out. On
 * PostgreSQL, `readonly` changes nothing: what a role may write is the server's to decide
 * (a role with SELECT only gets STORE_READONLY from any write). Nothing above
 * the engine names an adapter; what only SQLite has (a file to back up, quick_check) is
 * reached through `sqlite`, undefined on PostgreSQL.
 */
import { isDatabaseUrl, redactUrl } from './database-names.js';
import { EngineError } from './errors.js';
import type { RunStore } from './run-store.js';
import type { ScheduleStore } from './schedules.js';
import type { TaskStore } from './store.js';
import type { Durability } from './sqlite/connection.js';
import { createPgRunStore } from './postgres/run-store.js';
import { createPgScheduleStore } from './postgres/schedules.js';
import { createPgStore } from './postgres/task-store.js';
import { createSqliteRunStore } from './sqlite/run-store.js';
import { createSqliteScheduleStore } from './sqlite/schedules.js';
import { type SqliteTaskStore, createSqliteStore } from './sqlite/task-store.js';

export type StoreKind = 'sqlite' | 'postgres';

export interface Stores {
  readonly kind: StoreKind;
  /** The file's path, or the URL without its password. */
  readonly location: string;
  readonly store: TaskStore;
  readonly runs: RunStore;
  readonly schedules: ScheduleStore;
  /** The SQLite store when `kind` is sqlite: its file, quick_check, its connection. */
  readonly sqlite: SqliteTaskStore | undefined;
  /** Settles once the store can be used: PostgreSQL's first connection and migration (rejects with its fault). */
  readonly ready: Promise<void>;
  /** PostgreSQL: the identity (pg_namespace oid) of the schema this store opened; undefined on SQLite. */
  readonly schemaOid: (() => Promise<number>) | undefined;
}

export interface StoresOptions {
  /** A SQLite file (an absolute path, or `:memory:`) or a `postgres://` URL. */
  database: string;
  /** SQLite: `full` syncs every commit. PostgreSQL: the server's setting rules. @defaultValue 'normal' */
  durability?: Durability;
  readonly?: boolean;
  /** SQLite: the lock shared by the threads of one process. */
  writeLock?: Int32Array;
  /** SQLite: where WAL checkpoints run (see SqliteStoreOptions). */
  checkpoints?: 'background' | 'inline';
  /** PostgreSQL: connections in this store's pool (see poolSizeFor). */
  poolSize?: number;
  /** SQLite: writes asked for in one turn of the event loop share a transaction (see SqliteStoreOptions). */
  groupCommit?: boolean;
  /**
   * PostgreSQL: the schema must exist already (a daemon's threads open it after its main
   * thread): gone, it is STORE_REPLACED rather than created again. SQLite's threads need no
   * such flag: the main thread's guard sees a file replaced under it (sqlite/guard.ts).
   */
  existing?: boolean;
  /** PostgreSQL: the schema's identity as another store of this process found it (see PgStoreOptions). */
  schemaOid?: number;
  log?: (line: string) => void;
}

export { isDatabaseUrl, redactUrl } from './database-names.js';

/** Whether a database name is a PostgreSQL URL. */
export const isPostgresUrl = (name: string): boolean => /^postgres(ql)?:\/\//.test(name);

export function createStores(opts: StoresOptions): Stores {
  if (isPostgresUrl(opts.database)) {
    const store = createPgStore({ url: opts.database, existing: opts.existing === true, ...(opts.schemaOid === undefined ? {} : { schemaOid: opts.schemaOid }), ...(opts.poolSize === undefined ? {} : { poolSize: opts.poolSize }), ...(opts.log === undefined ? {} : { log: opts.log }) });
    return { kind: 'postgres', location: redactUrl(opts.database), store, runs: createPgRunStore(store), schedules: createPgScheduleStore(store), sqlite: undefined, ready: store.ready, schemaOid: () => store.schemaOid() };
  }
  if (isDatabaseUrl(opts.database)) {
    throw new EngineError(
      'VALIDATION_FAILED',
      `'${redactUrl(opts.database)}' is a URL taskloop cannot store tasks at (give a SQLite file's path, or a postgres:// URL); nothing was opened`,
    );
  }
  const sqlite = createSqliteStore({
    path: opts.database,
    durability: opts.durability,
    readonly: opts.readonly === true,
    ...(opts.writeLock === undefined ? {} : { writeLock: opts.writeLock }),
    ...(opts.checkpoints === undefined ? {} : { checkpoints: opts.checkpoints }),
    ...(opts.groupCommit === undefined ? {} : { groupCommit: opts.groupCommit }),
    ...(opts.log === undefined ? {} : { log: opts.log }),
  });
  return {
    kind: 'sqlite',
    location: opts.database,
    store: sqlite,
    runs: createSqliteRunStore(sqlite),
    schedules: createSqliteScheduleStore(sqlite),
    sqlite,
    ready: Promise.resolve(),
    schemaOid: undefined,
  };
}
