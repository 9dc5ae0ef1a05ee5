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

/**
 * Holds a row lock on a raw connection while `racers` start; they are let go once all of them
 * wait for it. `forced` is false when they did not all come to wait within WAIT_MS (a racer
 * slow to reach the server on a loaded machine): the lock is let go anyway and the round is
 * an ordinary one, its outcome still the test's to check; a test counts its forced rounds
 * (`forcedRounds`), and what the backends were doing is logged.
 */
export async function behindLock<T>(
  tm: Manager,
  lockSql: string,
  params: unknown[],
  racers: () => Array<Promise<T>>,
): Promise<PromiseSettledResult<T>[] & { forced: boolean }> {
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
  const forced = await waitBlocked(raw, pid, racing.length, () => settled);
  await raw.query('COMMIT');
  return Object.assign(await Promise.all(racing), { forced });
}

/** How long the racers get to come to wait for the lock. */
const WAIT_MS = 20_000;

async function waitBlocked(raw: pg.Client, pid: number, n: number, settled: () => number): Promise<boolean> {
  for (const deadline = Date.now() + WAIT_MS; Date.now() < deadline; ) {
    // Transitively: the first waiter holds the row's tuple lock, and the next ones wait for it.
    const { rows } = await raw.query<{ n: number }>(
      `WITH RECURSIVE waiting(pid) AS (
         SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
         UNION SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid)))
       SELECT count(*)::int AS n FROM waiting`,
      [pid],
    );
    if (rows[0]!.n + settled() >= n) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  const { rows } = await raw.query(
    `SELECT pid, state, wait_event_type, wait_event, pg_blocking_pids(pid) AS blocked_by, left(query, 120) AS query
       FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
  );
  console.warn(`race.ts: of ${n} racers, ${settled()} ended and the rest did not all wait for the lock (held by ${pid}) within ${WAIT_MS} ms; this round is not forced. Backends: ${JSON.stringify(rows)}`);
  return false;
}

/** Counts the rounds whose racers were all made to wait (a test with none forced proves no race). */
export function forcedRounds(): { add(r: { forced: boolean }): void; readonly n: number } {
  let n = 0;
  return {
    add: (r) => void (n += r.forced ? 1 : 0),
    get n() {
      return n;
    },
  };
}

