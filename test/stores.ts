/**
 * The store a contract test runs on. The `sqlite` vitest project runs every test on a fresh
 * SQLite file; the `postgres` project runs the contract files (vitest.config.ts) again on a
 * fresh schema of the run's PostgreSQL server (test/pg/global-setup.ts). Tests open their
 * stores through here, never through an adapter, so the same file tests both.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import pg from 'pg';
import { inject, onTestFinished } from 'vitest';
import { type RunStore, type ScheduleStore, type TaskStore, createSqliteRunStore, createSqliteScheduleStore, createSqliteStore } from '../src/engine/index.js';
import { createPgRunStore } from '../src/engine/postgres/run-store.js';
import { createPgScheduleStore } from '../src/engine/postgres/schedules.js';
import { createPgStore } from '../src/engine/postgres/task-store.js';

export type StoreKind = 'sqlite' | 'postgres';

/** The store this test process runs on. */
export const STORE_KIND: StoreKind = process.env.TASKLOOP_TEST_STORE === 'postgres' ? 'postgres' : 'sqlite';

/** A new database for one test: a file in `dir`, or a new schema (dropped when the test finishes, unless the server is the run's own). */
export function newDatabase(dir: string): string {
  if (STORE_KIND === 'sqlite') return join(dir, 'tasks.db');
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const url = `${inject('pgUrl')}${inject('pgUrl').includes('?') ? '&' : '?'}schema=${schema}`;
  // On the run's own server the schemas go with it (dropping one cost a test ~45 ms); on a
  // server TASKLOOP_PG_URL names, each is dropped when its test finishes.
  if (inject('pgThrowaway')) return url;
  onTestFinished(async () => {
    const client = new pg.Client({ connectionString: inject('pgUrl') });
    await client.connect();
    try {
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
  });
  return url;
}

/** A store on `database` (a path or a URL from newDatabase); another call opens another connection to it. */
export function openTaskStore(database: string, opts: { now?: () => number; watchFallbackMs?: number } = {}): TaskStore {
  if (STORE_KIND === 'sqlite') return createSqliteStore({ path: database, now: opts.now, watchFallbackMs: opts.watchFallbackMs });
  return createPgStore({ url: database, now: opts.now, pollMs: opts.watchFallbackMs });
}

/** The three stores of one connection to `database`: tasks, runs (all the run ports), schedules. */
export function openStores(database: string, opts: { now?: () => number } = {}): { store: TaskStore; runs: RunStore; schedules: ScheduleStore } {
  if (STORE_KIND === 'sqlite') {
    const store = createSqliteStore({ path: database, now: opts.now });
    return { store, runs: createSqliteRunStore(store), schedules: createSqliteScheduleStore(store) };
  }
  const store = createPgStore({ url: database, now: opts.now });
  return { store, runs: createPgRunStore(store), schedules: createPgScheduleStore(store) };
}

/** The run and schedule stores sharing `tm`'s connection (tm from freshManager). */
export function portsOf(tm: { store: TaskStore }): { runs: RunStore; schedules: ScheduleStore } {
  if (STORE_KIND === 'sqlite') {
    const store = tm.store as Parameters<typeof createSqliteRunStore>[0];
    return { runs: createSqliteRunStore(store), schedules: createSqliteScheduleStore(store) };
  }
  const store = tm.store as Parameters<typeof createPgRunStore>[0];
  return { runs: createPgRunStore(store), schedules: createPgScheduleStore(store) };
}

/**
 * Runs one statement on `tm`'s database, whichever the store, for a test that sets up a state
 * no port writes (an approval's deadline moved into the past). Write it with PostgreSQL's
 * placeholders, `$1`, `$2` …: on SQLite each becomes a `?` bound to that parameter (so one may
 * repeat). Keep to SQL both accept.
 */
export async function execSql(tm: { store: TaskStore }, sql: string, params: unknown[] = []): Promise<void> {
  await querySql(tm, sql, params);
}

/** Like execSql, with the rows the statement returns (a test reads a column no port shows). */
export async function querySql<R = Record<string, unknown>>(tm: { store: TaskStore }, sql: string, params: unknown[] = []): Promise<R[]> {
  if (STORE_KIND === 'sqlite') {
    const { db } = tm.store as Parameters<typeof createSqliteRunStore>[0];
    const order: unknown[] = [];
    const text = sql.replace(/\$(\d+)/g, (_, n: string) => (order.push(params[Number(n) - 1]), '?'));
    const statement = db.prepare(text);
    if (statement.reader) return statement.all(...order) as R[];
    statement.run(...order);
    return [];
  }
  const store = tm.store as Parameters<typeof createPgRunStore>[0];
  return store.read(() => store.conn.query(sql, params)) as Promise<R[]>;
}
