/**
 * The PostgreSQL connection: one `pg` pool per store, transactions in the database's time,
 * retries of serialization failures and deadlocks, and the server's faults named (faults.ts).
 * Where it connects, and with which of taskloop's options, is location.ts's.
 */
import type pg from 'pg';
import type { PgLocation } from './location.js';
import { poolSizeFor } from './pool-size.js';
import { type Opening, literal, namedStatements } from './statements.js';
import { isConnectionError, lostSession, pgFault } from './faults.js';
import { MAX_TRIES, type TxSession, conflictAgain, oneTrip, stalePlan, tx } from './transaction.js';

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
        if (await conflictAgain(err, attempt, what, location.display)) continue;
        throw fail(err, what);
      }
    }
  };

  const session: TxSession = { checkout, statement, openingOf, fail, display: location.display, fixed, channel };

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
    tx: (what, body, notify, opening) => tx(session, what, body, notify, opening),
    oneTrip: (what, statements) => oneTrip(session, what, statements),
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
