/**
 * The PostgreSQL connection: one `pg` pool per store, transactions in the database's time,
 * retries of serialization failures and deadlocks, and the server's faults named (faults.ts).
 * Where it connects, and with which of taskloop's options, is location.ts's.
 */
import type pg from 'pg';
import { EngineError } from '../errors.js';
import type { PgLocation } from './location.js';
import { poolSizeFor } from './pool-size.js';
import { type Opening, literal, namedStatements } from './statements.js';
import { RETRIED, isConnectionError, lostSession, pgFault } from './faults.js';

export { type PgLocation, parsePgUrl, redact } from './location.js';
export { poolSizeFor } from './pool-size.js';
export { type Opening, literal } from './statements.js';

// `pg` loads on the first connection, not with the engine: a SQLite user's CLI command
// would otherwise pay ~90 ms to load a driver it never uses.
let driver: Promise<typeof pg> | undefined;
const loadDriver = (): Promise<typeof pg> => (driver ??= import('pg').then((m) => m.default));

/** The milliseconds since the epoch, in the database's clock. */
export const NOW_MS = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

// int8 (ids, epoch ms, counts) as numbers: every value taskloop stores is a safe integer.
const typesOf = (driver: typeof pg): pg.CustomTypesConfig => ({
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === 20 ? (v: string) => Number(v) : driver.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
});

export type Query = <R extends pg.QueryResultRow = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>;

export interface PgConnection {
  readonly location: PgLocation;
  /** A statement outside any explicit transaction (autocommit); `what` names it in a fault. */
  query<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, params?: unknown[], what?: string): Promise<R[]>;
  /** Several statements without parameters in one round trip, each with its own snapshot; their rows in order. */
  multi(text: string): Promise<Array<Array<Record<string, unknown>>>>;
  /**
   * Runs `body` in one READ COMMITTED transaction. `now` is the database's clock when the
   * transaction began (or the test clock). Serialization failures and deadlocks roll back
   * and run `body` again, so `body` must only write through `q`. `notify`: the channels (their
   * suffixes after `taskloop_<schema>`, watch.ts workChannels) notified with the commit, for
   * what the body changed that other processes wait for.
   * `opening` runs in the transaction's first round trip with BEGIN; its rows are `body`'s
   * `opened`.
   */
  tx<T>(
    what: string,
    body: (q: Query, now: number, opened: Array<Record<string, unknown>>) => Promise<T>,
    notify?: (value: T, q: Query) => readonly string[],
    opening?: Opening,
  ): Promise<T>;
  /**
   * One transaction in one round trip: BEGIN, `statements` in order and COMMIT, written to the
   * socket at once. Each statement takes its own snapshot (READ COMMITTED), so one that waits for
   * a row lock is followed by statements that see what committed meanwhile. Their rows, in
   * order. A statement that fails aborts the transaction (the COMMIT then ends it without
   * writing); serialization failures and deadlocks run the whole again, as `tx`. Every
   * parameter must be a plain value (a string, a number, null, or an array of them): one pg
   * could fail to send would leave the COMMIT to commit the statements before it.
   */
  oneTrip(what: string, statements: ReadonlyArray<{ text: string; params: unknown[] }>): Promise<Array<Array<Record<string, unknown>>>>;
  /** The clock the store runs on: the database's, unless a test pinned one. */
  now(): Promise<number>;
  /** A client outside the pool (the LISTEN connection), not connected yet. */
  dedicated(): Promise<pg.Client>;
  readonly channel: string;
  close(): Promise<void>;
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
const stalePlan = (err: unknown): boolean =>
  (err as { code?: unknown } | null)?.code === '0A000' && /cached plan must not change result type/.test(String((err as Error).message));
const MAX_TRIES = 20;

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


export function connectPg(location: PgLocation, opts: { now?: () => number; poolSize?: number } = {}): PgConnection {
  const config: pg.PoolConfig = {
    connectionString: location.connectionString,
    // Queries sent without waiting for the one before: only a transaction's held statement
    // and its COMMIT are (tx); everything else awaits each answer as before.
    pipeline: true,
    // Unquoted: the name was checked against SCHEMA. Not `public`: PostgreSQL resolves a
    // function or operator to the closest match across the whole path, so a look-alike
    // there (for an untyped literal, or numeric * integer) would beat pg_catalog's and run
    // as taskloop's role; on older servers everyone may create in public.
    // READ COMMITTED whatever the role's or database's default_transaction_isolation: the
    // claims' SKIP LOCKED and the one-statement create and claim are written for it (under
    // REPEATABLE READ a claimer that meets a row another just claimed fails with 40001).
    // Both after the URL's own options: the last setting of a name is the one that holds.
    options: `${location.serverOptions} -c search_path=${location.schema} -c default_transaction_isolation=read\\ committed`.trimStart(),
    max: location.poolSize ?? opts.poolSize ?? poolSizeFor(),
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    application_name: 'taskloop',
  };
  let pooled: Promise<pg.Pool> | undefined;
  let ended = false;
  const poolOf = (): Promise<pg.Pool> =>
    (pooled ??= loadDriver().then((driver) => {
      const pool = new driver.Pool({ ...config, types: typesOf(driver) });
      // An idle client whose server went away: the pool drops it; the next query meets the fault.
      pool.on('error', () => undefined);
      // A checked-out client whose backend dies (terminated, a crash, a dropped socket) emits
      // 'error' too, and the pool listens only while it is idle: unheard, that event ends the
      // process. The query in flight already fails with the fault (STORE_UNAVAILABLE).
      pool.on('connect', (client) => client.on('error', () => undefined));
      return pool;
    }));
  const channel = `taskloop_${location.schema}`;
  const fixed = opts.now;
  const prepared = location.wakeups === 'listen';
  const statement = namedStatements(prepared);
  // The first round trip of a transaction: BEGIN, the clock, and the opening's rows. Simple
  // protocol (several statements in one), so its statements are prepared once per connection
  // with PREPARE and run with EXECUTE: planning the lock on tasks took 158 µs each time.
  const preparedOn = new WeakMap<pg.ClientBase, Set<string>>();
  const knownOn = (client: pg.ClientBase): Set<string> => {
    let known = preparedOn.get(client);
    if (known === undefined) preparedOn.set(client, (known = new Set()));
    return known;
  };
  const openingOf = (client: pg.ClientBase, opening: Opening | undefined): string => {
    const clock = opening?.givesNow === true ? '' : 'now';
    const args = opening?.args.map((a, i) => `${literal(a)}::${opening.types[i]}`) ?? [];
    if (!prepared) {
      const open = opening === undefined ? '' : `; ${opening.sql.replace(/\$(\d+)/g, (_, n: string) => args[Number(n) - 1]!)}`;
      return `BEGIN${clock === '' ? '' : `; SELECT ${NOW_MS} AS now`}${open}`;
    }
    const known = knownOn(client);
    let text = '';
    const wanted: Array<[string, string, string[]]> = [];
    if (clock !== '') wanted.push(['taskloop_now', `SELECT ${NOW_MS} AS now`, []]);
    if (opening !== undefined) wanted.push([opening.name, opening.sql, opening.types]);
    for (const [name, sql, types] of wanted) {
      if (known.has(name)) continue;
      text += `PREPARE ${name}${types.length > 0 ? `(${types.join(', ')})` : ''} AS ${sql}; `;
      known.add(name);
    }
    const run = wanted.map(([name]) => `EXECUTE ${name}${name === opening?.name && args.length > 0 ? `(${args.join(', ')})` : ''}`);
    return `${text}BEGIN; ${run.join('; ')}`;
  };

  const fail = (err: unknown, what: string): unknown => pgFault(err, location.display, what);

  /** A client of the pool, or the fault that kept one from us. */
  const checkout = async (what: string): Promise<pg.PoolClient> => {
    try {
      return await (await poolOf()).connect();
    } catch (err) {
      throw fail(err, what);
    }
  };

  /**
   * After a serialization failure or a deadlock (rolled back, nothing written): true once a
   * short, growing, jittered wait is over, to run the work again; STORE_BUSY after MAX_TRIES.
   * False for any other error.
   */
  const conflictAgain = async (err: unknown, attempt: number, what: string): Promise<boolean> => {
    const code = (err as { code?: unknown } | null)?.code;
    if (typeof code !== 'string' || !RETRIED.has(code)) return false;
    if (attempt >= MAX_TRIES) {
      throw new EngineError('STORE_BUSY', `${what} on ${location.display}: still conflicting after ${MAX_TRIES} tries (${code}); nothing was written`, { location: location.display, sqlstate: code });
    }
    await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, 2 ** attempt)));
    return true;
  };

  const query = async <R extends pg.QueryResultRow = Record<string, unknown>>(text: string, params?: unknown[], what = 'query'): Promise<R[]> => {
    for (let attempt = 1; ; attempt++) {
      let client: pg.PoolClient | undefined;
      try {
        client = await (await poolOf()).connect();
        const rows = (await client.query<R>(statement(text, params))).rows;
        client.release();
        return rows;
      } catch (err) {
        client?.release(stalePlan(err) || isConnectionError(err) || lostSession(err) ? (err as Error) : undefined);
        if (stalePlan(err) && attempt < MAX_TRIES) continue;
        // A statement outside a transaction of ours (a create, a claim) that lost a conflict
        // wrote nothing: it runs again, as a transaction would (tx).
        if (await conflictAgain(err, attempt, what)) continue;
        throw fail(err, what);
      }
    }
  };

  async function tx<T>(
    what: string,
    body: (q: Query, now: number, opened: Array<Record<string, unknown>>) => Promise<T>,
    notify?: (value: T, q: Query) => readonly string[],
    opening?: Opening,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const client = await checkout(what);
      let broken: unknown;
      let fresh = true; // may go back to the pool as it is
      try {
        let results: pg.QueryResult[];
        try {
          results = (await client.query(openingOf(client, opening))) as unknown as pg.QueryResult[];
        } catch (err) {
          // Whether its PREPAREs ran is not known: the connection is not given back for reuse.
          fresh = false;
          throw err;
        }
        const opened = opening === undefined ? [] : results[results.length - 1]!.rows;
        const clockAt = opening === undefined ? 1 : opening.givesNow === true ? 1 : 2;
        const now = fixed?.() ?? (results[results.length - clockAt]!.rows[0] as { now: number }).now;
        let held: Held | undefined;
        const run: Query = async (text, params) => (await client.query(statement(text, params))).rows;
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
        const commit = [...(notify?.(value, q) ?? []).map((suffix) => `NOTIFY ${channel}${suffix}`), 'COMMIT'].join('; ');
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
        const sent = corked(client, () => [client.query(statement(h.text, h.params)), client.query(commit)] as const);
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
        if (await conflictAgain(err, attempt, what)) continue;
        throw fail(err, what);
      } finally {
        // A connection that failed mid-transaction is not given back for reuse.
        client.release(!fresh || (broken !== undefined && (isConnectionError(broken) || lostSession(broken))) ? (broken as Error) : undefined);
      }
    }
  }

  async function oneTrip(what: string, statements: ReadonlyArray<{ text: string; params: unknown[] }>): Promise<Array<Array<Record<string, unknown>>>> {
    if (!statements.every((st) => st.params.every(plainParam))) throw new TypeError(`${what}: a value that is not plain cannot go in one round trip`);
    for (let attempt = 1; ; attempt++) {
      const client = await checkout(what);
      let broken: unknown;
      try {
        const sent = corked(client, () => [client.query('BEGIN'), ...statements.map((st) => client.query(statement(st.text, st.params))), client.query('COMMIT')]);
        const settled = await Promise.allSettled(sent);
        // The first failure is the cause; the statements after it only met the aborted transaction.
        const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
        return settled.slice(1, -1).map((r) => (r as PromiseFulfilledResult<pg.QueryResult>).value.rows);
      } catch (err) {
        broken = err;
        await client.query('ROLLBACK').catch(() => undefined);
        if (stalePlan(err) && attempt < MAX_TRIES) continue;
        if (await conflictAgain(err, attempt, what)) continue;
        throw fail(err, what);
      } finally {
        client.release(broken !== undefined && (stalePlan(broken) || isConnectionError(broken) || lostSession(broken)) ? (broken as Error) : undefined);
      }
    }
  }

  const multi = async (text: string): Promise<Array<Array<Record<string, unknown>>>> => {
    try {
      const results = (await (await poolOf()).query(text)) as unknown as pg.QueryResult[];
      return results.map((r) => r.rows);
    } catch (err) {
      throw fail(err, 'query');
    }
  };

  return {
    location,
    query,
    multi,
    tx,
    oneTrip,
    now: async () => fixed?.() ?? (await query<{ now: number }>(`SELECT ${NOW_MS} AS now`))[0]!.now,
    dedicated: async () => {
      const driver = await loadDriver();
      return new driver.Client({ ...config, types: typesOf(driver) } as pg.ClientConfig);
    },
    channel,
    close: async () => {
      if (ended || pooled === undefined) return;
      ended = true;
      await (await pooled).end();
    },
  };
}
