/** The embedded SQLite adapter of the TaskStore port. */
import type { ReadEventsQuery, SweepOptions, TaskStore, WriteOutcome } from '../store.js';
import type { TaskEvent } from '../types.js';
import { prepareClaim, prepareHeartbeat } from './claim.js';
import { type Db, type Durability, openDatabase, retryBusy } from './connection.js';
import { prepareCreate } from './create.js';
import { prepareMoves } from './moves.js';
import { prepareReads } from './reads.js';
import { createEventWriter } from './rows.js';
import { prepareSweep, prepareTransition } from './transition.js';
import { createChangeWatcher } from './watch.js';

export interface SqliteStoreOptions {
  /** Database file. */
  path: string;
  /** @defaultValue 'normal' */
  durability?: Durability;
  /** Clock in epoch ms; tests pass their own. @defaultValue Date.now */
  now?: () => number;
  /** Interval of the data_version poll backing the file watch. @defaultValue 50 */
  watchFallbackMs?: number;
}

export interface SqliteTaskStore extends TaskStore {
  /** The connection, for adapters of later tables (runs, approvals …) sharing this file and thread. */
  readonly db: Db;
  readonly path: string;
  readonly now: () => number;
  /** Runs `fn` in one BEGIN IMMEDIATE transaction, retrying on lock contention. */
  write<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>>;
}

export function createSqliteStore(opts: SqliteStoreOptions): SqliteTaskStore {
  const db = openDatabase({ path: opts.path, durability: opts.durability });
  const now = opts.now ?? Date.now;
  const writer = createEventWriter(db);
  const apply = prepareMoves(db, writer);
  const create = prepareCreate(db, writer);
  const claim = prepareClaim(db, writer);
  const heartbeat = prepareHeartbeat(db);
  const transition = prepareTransition(db, apply);
  const sweep = prepareSweep(db, apply);
  const reads = prepareReads(db);
  const watcher = createChangeWatcher(db, opts.path, opts.watchFallbackMs);

  // One reusable wrapper: better-sqlite3 rolls back when the body throws.
  const tx = db.transaction((body: () => unknown) => body());

  async function write<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>> {
    const outcome = await retryBusy(() => {
      const events: TaskEvent[] = [];
      const value = tx.immediate(() => fn(events, now())) as T;
      return { value, events };
    }, what);
    if (outcome.events.length > 0) watcher.notifyLocal();
    return outcome;
  }

  return {
    db,
    path: opts.path,
    now,
    write,
    createTasks: (inputs, creator) => write('create', (events, at) => create(inputs, creator, at, events)),
    claim: (input) => write('claim', (events, at) => claim(input, at, events)),
    heartbeat: async (input) => {
      const { value } = await write('heartbeat', (_events, at) => heartbeat(input, at));
      return { leaseExpiresAt: value };
    },
    transition: (input) => write('transition', (events, at) => transition(input, at, events)),
    sweep: (o: SweepOptions) => write('sweep', (events, at) => sweep(o.graceMs, at, events)),
    getTask: async (id, withEvents) => reads.getTask(id, withEvents),
    findTasks: async (query) => reads.findTasks(query),
    readEvents: async (query: ReadEventsQuery) => reads.readEvents(query),
    stats: async () => reads.stats(),
    watch: (onChange) => watcher.subscribe(onChange),
    close: async () => {
      watcher.close();
      if (db.open) db.close();
    },
  };
}
