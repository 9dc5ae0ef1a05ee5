/**
 * Forcing the races of two processes on PostgreSQL: a second store on the same schema, and a
 * raw connection that holds the contended row lock until every racer waits for it.
 */
import type pg from 'pg';
import { onTestFinished } from 'vitest';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import type { Clock, freshManager } from '../helpers.js';
import { openTaskStore } from '../stores.js';

export type Manager = ReturnType<typeof freshManager>;

export const storeOf = (tm: Manager) => tm.store as PgTaskStore;

/** A query on the test's schema (autocommit). */
export const sql = <R extends Record<string, unknown>>(tm: Manager, text: string, params: unknown[] = []) => storeOf(tm).conn.query<R>(text, params);

/** Another store on the same schema and clock: a second process. */
export function second(tm: Manager, clock: Clock): PgTaskStore {
  const other = openTaskStore(tm.path, { now: clock.now }) as PgTaskStore;
  onTestFinished(() => other.close());
  return other;
}

/** Holds a row lock on a raw connection while `racers` start; they are let go once all of them wait for it. */
export async function behindLock<T>(tm: Manager, lockSql: string, params: unknown[], racers: () => Array<Promise<T>>): Promise<PromiseSettledResult<T>[]> {
  const raw = await storeOf(tm).conn.dedicated();
  await raw.connect();
  onTestFinished(() => raw.end());
  await raw.query('BEGIN');
  await raw.query(lockSql, params);
  const pid = (await raw.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  let settled = 0;
  const racing = racers().map((p) =>
    p.then(
      (value): PromiseSettledResult<T> => {
        settled++;
        return { status: 'fulfilled', value };
      },
      (reason: unknown): PromiseSettledResult<T> => {
        settled++;
        return { status: 'rejected', reason };
      },
    ),
  );
  // A racer that ended without waiting for the lock (it failed first) is the test's to judge.
  await waitBlocked(raw, pid, racing.length, () => settled);
  await raw.query('COMMIT');
  return Promise.all(racing);
}

async function waitBlocked(raw: pg.Client, pid: number, n: number, settled: () => number): Promise<void> {
  // Up to 30 s: on a loaded machine a racer's first connection can take seconds.
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; ) {
    // Transitively: the first waiter holds the row's tuple lock, and the next ones wait for it.
    const { rows } = await raw.query<{ n: number }>(
      `WITH RECURSIVE waiting(pid) AS (
         SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
         UNION SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid)))
       SELECT count(*)::int AS n FROM waiting`,
      [pid],
    );
    if (rows[0]!.n + settled() >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`the racers never all waited for the lock (${n} expected)`);
}

