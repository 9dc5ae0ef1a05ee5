/**
 * Transactions on one pooled connection, and their retries: a body's transaction whose last
 * write rides with its COMMIT (`tx`), and a fixed list of statements sent with BEGIN and
 * COMMIT in one socket write (`oneTrip`). connection.ts gives each its session: how to take a
 * client, name a statement, open a transaction and name a fault.
 */
import type pg from 'pg';
import { EngineError } from '../errors.js';
import type { Opening, Query } from './connection.js';
import { RETRIED, isConnectionError, lostSession } from './faults.js';

/** What a transaction needs of its connection (connection.ts connectPg). */
export interface TxSession {
  /** A client of the pool, or the fault that kept one from us. */
  checkout(what: string): Promise<pg.PoolClient>;
  /** A statement by name (prepared once per connection), or as text behind a pooler. */
  statement(text: string, params: unknown[] | undefined): pg.QueryConfig;
  /** The text of a transaction's first round trip: BEGIN, the clock and `opening`. */
  openingOf(client: pg.ClientBase, opening: Opening | undefined): string;
  /** The engine error for a server fault met doing `what`. */
  fail(err: unknown, what: string): unknown;
  /** Where the store is, as a fault names it. */
  display: string;
  /** The test clock, when one was given. */
  fixed: (() => number) | undefined;
  /** The store's NOTIFY channel (watch.ts adds its suffixes). */
  channel: string;
}

/**
 * A statement a transaction's body leaves for later because nothing it does next needs its
 * rows: it runs in the COMMIT's round trip, or just before the body's next statement. Its
 * rows reach `done` (after the commit, or before that next statement).
 */
export interface Held {
  text: string;
  params: unknown[];
  done(rows: Array<Record<string, unknown>>): void;
}

const holders = new WeakMap<Query, (held: Held) => Promise<void>>();

/**
 * Leaves `held` to `q`'s transaction (see Held); a statement held before runs first. A `q`
 * outside `tx` runs it now. Its errors then surface at the next statement or the commit,
 * which roll the transaction back whole as they would have here.
 */
export async function hold(q: Query, held: Held): Promise<void> {
  const holder = holders.get(q);
  if (holder !== undefined) return holder(held);
  held.done(await q(held.text, held.params));
}

/** A bind value pg sends as it is (no toPostgres, no Date, no object to serialize): it cannot fail in the client. */
const plainParam = (v: unknown): boolean =>
  v === null || v === undefined || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' || (Array.isArray(v) && v.every(plainParam));

/**
 * A statement this connection prepared before the table changed (a newer taskloop added a
 * column while this one runs): PostgreSQL refuses to reuse its plan. The connection goes,
 * and with it every statement it prepared; the work runs again on another.
 */
export const stalePlan = (err: unknown): boolean =>
  (err as { code?: unknown } | null)?.code === '0A000' && /cached plan must not change result type/.test(String((err as Error).message));
export const MAX_TRIES = 20;

/** What `send` asks of `client`, written to the socket at once (the pool's clients pipeline: none waits for the one before). */
function corked<T>(client: pg.PoolClient, send: () => T): T {
  const stream = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  stream?.cork?.();
  try {
    return send();
  } finally {
    stream?.uncork?.();
  }
}

/**
 * After a serialization failure or a deadlock (rolled back, nothing written): true once a
 * short, growing, jittered wait is over, to run the work again; STORE_BUSY after MAX_TRIES.
 * False for any other error.
 */
export async function conflictAgain(err: unknown, attempt: number, what: string, display: string): Promise<boolean> {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !RETRIED.has(code)) return false;
  if (attempt >= MAX_TRIES) {
    throw new EngineError('STORE_BUSY', `${what} on ${display}: still conflicting after ${MAX_TRIES} tries (${code}); nothing was written`, { location: display, sqlstate: code });
  }
  await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** attempt)));
  return true;
}

/** PgConnection.tx: `body` in one transaction, its last write sent with the COMMIT. */
export async function tx<T>(
  s: TxSession,
  what: string,
  body: (q: Query, now: number, opened: Array<Record<string, unknown>>) => Promise<T>,
  notify?: (value: T, q: Query) => readonly string[],
  opening?: Opening,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await s.checkout(what);
    let broken: unknown;
    let fresh = true; // may go back to the pool as it is
    try {
      let results: pg.QueryResult[];
      try {
        results = (await client.query(s.openingOf(client, opening))) as unknown as pg.QueryResult[];
      } catch (err) {
        // Whether its PREPAREs ran is not known: the connection is not given back for reuse.
        fresh = false;
        throw err;
      }
      const opened = opening === undefined ? [] : results[results.length - 1]!.rows;
      const clockAt = opening === undefined ? 1 : opening.givesNow === true ? 1 : 2;
      const now = s.fixed?.() ?? (results[results.length - clockAt]!.rows[0] as { now: number }).now;
      let held: Held | undefined;
      const run: Query = async (text, params) => (await client.query(s.statement(text, params))).rows;
      const release = async (): Promise<void> => {
        if (held === undefined) return;
        const h = held;
        held = undefined;
        h.done(await run(h.text, h.params));
      };
      const q: Query = async (text, params) => {
        await release();
        return run(text, params);
      };
      holders.set(q, async (h) => {
        await release();
        held = h;
      });
      const value = await body(q, now, opened);
      const commit = [...(notify?.(value, q) ?? []).map((suffix) => `NOTIFY ${s.channel}${suffix}`), 'COMMIT'].join('; ');
      if (held !== undefined && !(held as Held).params.every(plainParam)) await release();
      const h = held as Held | undefined;
      if (h === undefined) {
        await client.query(commit);
        return value;
      }
      // The held statement and the COMMIT back to back, in one round trip (the pool's
      // clients pipeline; this is the one place that sends before an answer came). Its
      // values stay bound parameters. If it fails in the server, the transaction is
      // aborted: the COMMIT (or the NOTIFY before it) ends it without writing, and the
      // ROLLBACK below is a no-op. A failure in the client before the statement is sent
      // would let the COMMIT commit the rest, so only plain values are sent this way (a
      // value pg could fail to serialize is written before the COMMIT, as any statement).
      held = undefined;
      // Corked, the two go out in one write to the socket, not two.
      const sent = corked(client, () => [client.query(s.statement(h.text, h.params)), client.query(commit)] as const);
      const [write, end] = await Promise.allSettled(sent);
      if (write.status === 'rejected') throw write.reason;
      if (end.status === 'rejected') throw end.reason;
      h.done(write.value.rows);
      return value;
    } catch (err) {
      broken = err;
      await client.query('ROLLBACK').catch(() => undefined);
      if (stalePlan(err) && attempt < MAX_TRIES) {
        fresh = false;
        continue;
      }
      if (await conflictAgain(err, attempt, what, s.display)) continue;
      throw s.fail(err, what);
    } finally {
      // A connection that failed mid-transaction is not given back for reuse.
      client.release(!fresh || (broken !== undefined && (isConnectionError(broken) || lostSession(broken))) ? (broken as Error) : undefined);
    }
  }
}

/** PgConnection.oneTrip: BEGIN, `statements` and COMMIT in one socket write. */
export async function oneTrip(s: TxSession, what: string, statements: ReadonlyArray<{ text: string; params: unknown[] }>): Promise<Array<Array<Record<string, unknown>>>> {
  if (!statements.every((st) => st.params.every(plainParam))) throw new TypeError(`${what}: a value that is not plain cannot go in one round trip`);
  for (let attempt = 1; ; attempt++) {
    const client = await s.checkout(what);
    let broken: unknown;
    try {
      const sent = corked(client, () => [client.query('BEGIN'), ...statements.map((st) => client.query(s.statement(st.text, st.params))), client.query('COMMIT')]);
      const settled = await Promise.allSettled(sent);
      // The first failure is the cause; the statements after it only met the aborted transaction.
      const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      return settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<pg.QueryResult>).value.rows);
    } catch (err) {
      broken = err;
      await client.query('ROLLBACK').catch(() => undefined);
      if (stalePlan(err) && attempt < MAX_TRIES) continue;
      if (await conflictAgain(err, attempt, what, s.display)) continue;
      throw s.fail(err, what);
    } finally {
      client.release(broken !== undefined && (stalePlan(broken) || isConnectionError(broken) || lostSession(broken)) ? (broken as Error) : undefined);
    }
  }

}
