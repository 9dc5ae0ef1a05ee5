/** The embedded SQLite adapter of the TaskStore port. */
import { resolve } from 'node:path';
import type { ReadEventsQuery, SweepOptions, TaskStore, WriteOutcome } from '../store.js';
import type { TaskEvent } from '../types.js';
import { prepareClaim, prepareHeartbeat } from './claim.js';
import { type Checkpointer, type Db, type Durability, isBusyError, openDatabase, retryBusy, startCheckpointer } from './connection.js';
import { prepareCreate } from './create.js';
import { withWriteLock } from './write-lock.js';
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
  /**
   * `background`: once this store has committed a few hundred times, WAL checkpoints run
   * in a worker thread (see startCheckpointer) and commits no longer pay for them.
   * `inline`: SQLite's own, in the commit that crosses the threshold. @defaultValue 'background'
   */
  checkpoints?: 'background' | 'inline';
  /** A lock shared by the threads of this process (see write-lock.ts). @defaultValue none */
  writeLock?: Int32Array;
}

export interface SqliteTaskStore extends TaskStore {
  /** The connection, for adapters of later tables (runs, approvals …) sharing this file and thread. */
  readonly db: Db;
  readonly path: string;
  readonly now: () => number;
  /** Runs `fn` in one BEGIN IMMEDIATE transaction, retrying on lock contention. */
  write<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>>;
}

/** Commits by this store before its background checkpointer starts. */
const CHECKPOINTER_AFTER = 200;

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

  // One reusable wrapper: better-sqlite3 rolls back when the body throws. The body and its
  // arguments are passed through, so a write allocates no closure for it.
  const tx = db.transaction((body: (events: TaskEvent[], now: number) => unknown, events: TaskEvent[], at: number) => body(events, at));

  // The background checkpointer starts with the first writes that show this process writes
  // steadily (a one-shot CLI command never starts a thread for it).
  let checkpointer: Checkpointer | undefined;
  let commits = 0;
  const background = opts.path !== ':memory:' && opts.checkpoints !== 'inline';
  // Runs after a commit: it must not throw, or a committed write would be reported failed.
  const committed = (): void => {
    if (checkpointer !== undefined) checkpointer.noteCommit();
    else if (background && ++commits === CHECKPOINTER_AFTER) {
      try {
        checkpointer = startCheckpointer(resolve(opts.path), opts.durability, db.pragma('wal_autocheckpoint', { simple: true }) as number);
      } catch {
        // No worker thread: SQLite's inline auto-checkpoint stays in charge.
      }
    }
  };

  function attempt<T>(fn: (events: TaskEvent[], now: number) => T): WriteOutcome<T> {
    const events: TaskEvent[] = [];
    const value = withWriteLock(opts.writeLock, () => tx.immediate(fn, events, now()) as T);
    committed();
    return { value, events };
  }

  function write<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>> {
    let outcome: WriteOutcome<T>;
    try {
      outcome = attempt(fn);
    } catch (err) {
      // Lock contention: retry with backoff (asynchronously). Anything else is the caller's.
      if (!isBusyError(err)) return Promise.reject(err);
      return retryBusy(() => attempt(fn), what).then((o) => {
        if (o.events.length > 0) watcher.notifyLocal();
        return o;
      });
    }
    if (outcome.events.length > 0) watcher.notifyLocal();
    return Promise.resolve(outcome);
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
      // The checkpointer's connection closes first, so this one is the last and its close
      // checkpoints the WAL and removes it as before.
      await checkpointer?.close();
      if (db.open) db.close();
    },
  };
}
