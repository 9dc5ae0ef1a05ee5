/**
 * The PostgreSQL adapter of the TaskStore port. Daemons on many machines share one database:
 * claims skip locked rows, every comparison of times uses the database's clock (the test
 * clock when one is given), wake-ups come by LISTEN/NOTIFY, and the event log is read up to
 * its horizon so no event is ever skipped (reads.ts).
 *
 * The store is usable at once: the schema is migrated by the first call (every method waits
 * for it), so opening stays synchronous like SQLite's; `ready` is that first migration.
 */
import type { ReadEventsQuery, StoreInfo, TaskStore, WriteOutcome } from '../store.js';
import { sweepInBatches } from '../sweeps.js';
import type { ClaimInput, TaskEvent } from '../types.js';
import { workWakeOf } from '../claims.js';
import { type PgConnection, connectPg, parsePgUrl } from './connection.js';
import { parseClaimInput } from '../schemas.js';
import { claimOne, claimTask, claimable, heartbeat, pickOpening, pickedSlowly, primePick } from './claim.js';
import { createHorizon, createReads } from './reads.js';
import { PG_MIGRATIONS } from './migrations.js';
import { migratePg, readVersion } from './schema.js';
import { createOne, createTasks, isPlain, markStale, reclaimStale, transition } from './tasks.js';
import { createPgWatcher, workChannels } from './watch.js';
import { deferEvents, flushEvents, lockOpening, primeLock } from './moves.js';
import { moveOne, seenClaims } from './move-one.js';
import { toTask } from '../task-rows.js';
import type { Query } from './connection.js';

/** The task a write locks first (PgTaskStore.write). */
export interface TaskLock {
  taskId: number;
  /** The whole row (a move), or only its claim (a step's fence). */
  whole: boolean;
}

/** A claim without a task id: it picks in its first round trip (claim.ts pickOpening). */
export interface Pick {
  pick: ClaimInput;
}

/** What a claim takes first: the named task's row, or the pick. */
export const claimLock = (input: ClaimInput): TaskLock | Pick => (input.taskId === undefined ? { pick: input } : { taskId: input.taskId, whole: true });

/** A write that moves task `taskId` locks its whole row first; none when there is no id. */
export const wholeRow = (taskId: number | undefined): TaskLock | undefined => (taskId === undefined ? undefined : { taskId, whole: true });

export interface PgStoreOptions {
  /** `postgres://user:password@host:port/database`, with taskloop's options (connection.ts). */
  url: string;
  /** Clock in epoch ms, for tests; otherwise the database's clock. @defaultValue the database's */
  now?: () => number;
  /** Connections in the pool, unless the URL sets `pool`. @defaultValue poolSizeFor() */
  poolSize?: number;
  /** The watch's poll interval (watch.ts). */
  pollMs?: number;
  /**
   * The schema was made by whoever opened the database first (a daemon's worker threads, after
   * its main thread): if it is gone, opening is STORE_REPLACED, never a new empty schema.
   * @defaultValue false (a missing schema is created)
   */
  existing?: boolean;
  /** The schema's identity (pg_namespace oid) as the process's first store found it: another is STORE_REPLACED. */
  schemaOid?: number;
  log?: (line: string) => void;
}

export interface PgTaskStore extends TaskStore {
  readonly conn: PgConnection;
  /** The schema migrated (rejects STORE_TOO_NEW or a fault); every method waits for it. */
  readonly ready: Promise<void>;
  /**
   * The identity (pg_namespace oid) of the schema this store opened: a schema dropped and made
   * again under the same name is another database, as a SQLite file replaced under its path.
   */
  schemaOid(): Promise<number>;
  /** The test clock, when one was given. */
  readonly fixedNow: (() => number) | undefined;
  /**
   * A write transaction with its events, notifying other processes when it wrote any (see
   * connection.ts tx). `lock`: the task the body locks first (a move, a fenced run write),
   * locked with BEGIN in one round trip: `whole` its row, or its claim only (moves.ts lockOpening).
   */
  write<T>(what: string, body: (q: Query, now: number, events: TaskEvent[]) => Promise<T>, lock?: TaskLock | Pick): Promise<WriteOutcome<T>>;
  /** Runs `fn` once the schema is ready. */
  read<T>(fn: () => Promise<T>): Promise<T>;
  /** Calls `onChange` soon after a stop, pause or resume commits anywhere (watch.ts). */
  watchControls(onChange: () => void): () => void;
}

export function createPgStore(opts: PgStoreOptions): PgTaskStore {
  const location = parsePgUrl(opts.url);
  const conn = connectPg(location, { now: opts.now, poolSize: opts.poolSize });
  // The schema's identity is read with its version, in the opening's one round trip.
  const migrated = migratePg(conn, { existing: opts.existing === true, ...(opts.schemaOid === undefined ? {} : { oid: opts.schemaOid }) });
  const ready = migrated.then(() => undefined);
  // Nobody may have asked yet: the rejection is kept for the first caller, not reported unhandled.
  ready.catch(() => undefined);
  const schemaOid = async (): Promise<number> => (await migrated).oid;
  const horizon = createHorizon(conn);
  const reads = createReads(conn, horizon);
  const watcher = createPgWatcher(conn, horizon, { pollMs: opts.pollMs, log: opts.log });
  // What this store's claimers last saw of their claims: their moves go in one round trip while the row is still that (move-one.ts).
  const seen = seenClaims();

  async function write<T>(what: string, body: (q: Query, now: number, events: TaskEvent[]) => Promise<T>, lock?: TaskLock | Pick): Promise<WriteOutcome<T>> {
    await ready;
    let events: TaskEvent[] = [];
    let last: Query | undefined;
    const opening = lock === undefined ? undefined : 'pick' in lock ? pickOpening(lock.pick, opts.now?.()) : lockOpening(lock.taskId, lock.whole);
    const value = await conn.tx(
      what,
      async (q, now, opened) => {
        events = []; // a retried transaction starts over
        last = q;
        if (opening !== undefined && lock !== undefined) {
          if ('pick' in lock) primePick(q, opened[0]);
          else primeLock(q, lock.taskId, lock.whole, opened[0]);
        }
        deferEvents(q);
        const value = await body(q, now, events);
        await flushEvents(q);
        return value;
      },
      () => workChannels(workWakeOf(events, last !== undefined && pickedSlowly(last))),
      opening,
    );
    return { value, events };
  }
  const read = async <T>(fn: () => Promise<T>): Promise<T> => {
    await ready;
    return fn();
  };

  return {
    conn,
    ready,
    schemaOid,
    fixedNow: opts.now,
    write,
    read,
    info: () =>
      read(async (): Promise<StoreInfo> => {
        const [row] = await conn.query<{ v: string }>("SELECT current_setting('server_version') AS v");
        return {
          kind: 'postgres',
          location: `${location.display}${location.display.includes('?') ? '&' : '?'}schema=${location.schema}`,
          version: `PostgreSQL ${row?.v ?? '?'}`,
          schemaVersion: await readVersion(conn),
          knownSchemaVersion: PG_MIGRATIONS.length,
          readonly: false,
          // Many machines meet in the database: leases and liveness in its clock, claims that
          // skip locked rows, LISTEN/NOTIFY (unless wakeups=poll); a pid means nothing there.
          capabilities: { multipleHosts: true, pidLiveness: false, pushWakeups: location.wakeups === 'listen', skipLocked: true },
        };
      }),
    clock: () => read(() => conn.now()),
    createTasks: async (inputs, creator) => {
      // One plain task: one statement, one round trip (tasks.ts createOne).
      if (inputs.length === 1 && isPlain(inputs[0]!)) {
        await ready;
        const { result, event } = await createOne((text, params) => conn.query(text, params, 'create'), inputs[0]!, creator, opts.now?.());
        return { value: [result], events: [event] };
      }
      return write('create', (q, now, events) => createTasks(q, inputs, creator, now, events));
    },
    claim: async (input) => {
      if (input.taskId !== undefined) return write('claim', (q, now, events) => claimTask(q, input, now, events), claimLock(input));
      // A pick: one statement, one round trip (claim.ts claimOne).
      await ready;
      const claimed = await claimOne((text, params) => conn.query(text, params, 'claim'), input, opts.now?.());
      if (claimed !== null) seen.remember(claimed.row, claimed.task.claimToken);
      return { value: claimed?.task ?? null, events: claimed?.events ?? [] };
    },
    claimable: async (input) => {
      const parsed = parseClaimInput(input);
      return read(async () => claimable(conn.query, parsed, await conn.now()));
    },
    heartbeat: (input) => read(async () => ({ leaseExpiresAt: await heartbeat(conn.query, input, opts.now?.()) })),
    transition: async (input) => {
      const token = input.claimToken;
      const known = token === undefined ? undefined : seen.get(token);
      if (known !== undefined) {
        await ready;
        const moved = await moveOne(conn, input, known, opts.now?.());
        if (moved !== null) {
          seen.remember(moved.row, token!);
          return { value: moved.task, events: moved.events };
        }
        // The row is no longer as remembered (or the rules refuse the move on it): the full
        // path reads it, and remembers it again only if the claim goes on. A dead claim is
        // not tried in one round trip again (a lock on a row that may be another's by now).
        seen.forget(token!);
      }
      const out = await write('transition', (q, now, events) => transition(q, input, now, events), wholeRow(input.taskId));
      if (token !== undefined) seen.remember(out.value, token);
      return { value: toTask(out.value), events: out.events };
    },
    sweep: (o) =>
      sweepInBatches((at, skip) =>
        write('sweep', async (q, now, events) => {
          const marked = at.mark ? await markStale(q, now) : 0;
          return reclaimStale(q, o.graceMs, now, events, marked, at, skip);
        }),
      ),
    getTask: (id, withEvents, reader) => read(() => reads.getTask(id, withEvents, reader)),
    findTasks: (query) => read(() => reads.findTasks(query)),
    readEvents: (query: ReadEventsQuery) => read(() => reads.readEvents(query)),
    stats: () => read(() => reads.stats()),
    lastEventId: () => read(() => horizon.settled()),
    watch: (onChange, topic, queue) => watcher.subscribe(onChange, topic, queue),
    watchControls: (onChange) => watcher.subscribe(onChange, 'controls'),
    close: async () => {
      watcher.close();
      await ready.catch(() => undefined);
      await conn.close();
    },
  };
}
