/**
 * The embedded SQLite adapter of the TaskStore port.
 *
 * Faults: every statement the store runs (the `write` wrapper, which every adapter sharing
 * the store writes through, and `read`) names the SQLite faults it meets (faults.ts). A
 * corruption error, or a file the guard finds deleted or replaced (guard.ts), stops this
 * store's writes for good: each later write is refused with that fault, and `onFault`
 * listeners hear of it once. SQLITE_FULL rolls the write back whole and starts the disk-full
 * recovery (space.ts); the next write after space returns succeeds without a restart.
 */
import { resolve } from 'node:path';
import { type WorkWake, wakeBuckets, withQueues, workWakeOf } from '../claims.js';
import { type EngineError, isEngineError } from '../errors.js';
import type { ReadEventsQuery, SweepOptions, TaskStore, WriteOutcome } from '../store.js';
import { sweepInBatches } from '../sweeps.js';
import type { TaskEvent } from '../types.js';
import { type Checkpointer, startCheckpointer } from './checkpointer.js';
import { parseClaimInput } from '../schemas.js';
import { prepareClaim, prepareClaimable, prepareHeartbeat } from './claim.js';
import { type Db, type Durability, databasePath, isBusyError, openDatabase, retryBusy } from './connection.js';
import { WRITE_SPIN_MS, readOnBusy, spinOnBusy } from './busy.js';
import { prepareCreate } from './create.js';
import { createGroupCommit } from './group-commit.js';
import { MIGRATIONS } from './migrations.js';
import { FATAL_FAULTS, faultReporter, storeError, storeFault } from './faults.js';
import { type FileGuard, createFileGuard, quickCheck } from './guard.js';
import { prepareMoves } from './moves.js';
import { prepareReads } from './reads.js';
import { createEventWriter } from './rows.js';
import { type SpaceKeeper, createSpaceKeeper } from './space.js';
import { prepareSweep, prepareTransition } from './transition.js';
import { createChangeWatcher } from './watch.js';
import { type WakeTopic, signalWake, takeWakes } from './wake-files.js';
import { SHARED_FAULT, claimCheckpointer, countCommit, raiseSharedFault, releaseWriteLock, sharedFault, tryWriteLock, whenUnlocked, withWriteLock } from './write-lock.js';

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
  /**
   * Open the file for reading only (connection.ts): it must exist (STORE_NOT_FOUND), nothing
   * is created, and every write is refused with STORE_READONLY. @defaultValue false
   */
  readonly?: boolean;
  /** One line for each fault the store deals with itself (a failing watcher poll, a full disk). @defaultValue none */
  log?: (line: string) => void;
  /** How often, at most, a write first looks whether the file or its -wal was replaced. @defaultValue 50 */
  guardIntervalMs?: number;
  /**
   * Writes asked for within one turn of the event loop share one transaction, each under its
   * own savepoint (group-commit.ts): for a thread that holds many runs, such as a daemon's.
   * @defaultValue false
   */
  groupCommit?: boolean;
}

export interface SqliteTaskStore extends TaskStore {
  /** The connection, for adapters of later tables (runs, approvals …) sharing this file and thread. */
  readonly db: Db;
  readonly path: string;
  readonly now: () => number;
  readonly readonly: boolean;
  /** Runs `fn` in one BEGIN IMMEDIATE transaction, retrying on lock contention; SQLite faults come out as STORE_* errors. */
  write<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>>;
  /** Runs `fn` (reads on `db`); a SQLite fault it meets comes out as a STORE_* error. */
  read<T>(what: string, fn: () => T): T;
  /** The fault that stopped this store's writes (STORE_CORRUPT, STORE_REPLACED), if any. */
  readonly fault: EngineError | undefined;
  /** Calls `listener` once, when a fault stops this store's writes. Returns the unsubscribe function. */
  onFault(listener: (fault: EngineError) => void): () => void;
  /** PRAGMA quick_check; on failure the store stops writing and this throws STORE_CORRUPT. */
  quickCheck(): void;
  /** Calls `onChange` soon after a stop, pause or resume is written by any process (and within the poll after any commit). */
  watchControls(onChange: () => void): () => void;
  /** Wakes `topic`'s watchers in every process, after a commit that concerns them (wake-files.ts). */
  signal(topic: WakeTopic): void;
}

/** A commit, and the topics its writes noted (a dependent freed, a control changed: wake-files.ts markWake). */
type Committed<T> = WriteOutcome<T> & { wakes: ReturnType<typeof takeWakes> };

/** Commits by this store before its background checkpointer starts. */
const CHECKPOINTER_AFTER = 200;

export function createSqliteStore(opts: SqliteStoreOptions): SqliteTaskStore {
  // The real place of the file (a symlink followed as SQLite follows it): its -wal is beside it.
  const path = databasePath(opts.path);
  const file = path !== ':memory:';
  const readonly = opts.readonly === true;
  const log = opts.log ?? (() => undefined);
  const db = openDatabase({ path, durability: opts.durability, readonly });
  // The store waits for the write lock itself (busy.ts), never in SQLite's busy handler.
  if (!readonly) db.pragma('busy_timeout = 0');
  const now = opts.now ?? Date.now;
  const writer = createEventWriter(db);
  const apply = prepareMoves(db, writer);
  const create = prepareCreate(db, writer);
  const claim = prepareClaim(db, writer);
  const anyClaimable = prepareClaimable(db);
  const heartbeat = prepareHeartbeat(db);
  const transition = prepareTransition(db, apply);
  const sweep = prepareSweep(db, apply);
  const reads = prepareReads(db);
  const lock = opts.writeLock;
  const guard: FileGuard | undefined = file && !readonly
    ? createFileGuard({ db, path, intervalMs: opts.guardIntervalMs, exclusive: (fn) => withWriteLock(lock, fn) })
    : undefined;
  const space: SpaceKeeper | undefined = file && !readonly ? createSpaceKeeper(db, path, log) : undefined;

  /** Names a SQLite fault; corruption stops the store's writes, a full disk starts the recovery. */
  const fail = (err: unknown, what: string): unknown => {
    const named = storeError(err, path, what);
    if (isEngineError(named)) {
      if (named.code === 'STORE_FULL') space?.full();
      else if (FATAL_FAULTS.has(named.code)) guard?.trip(named);
    }
    return named;
  };
  const watchFault = faultReporter(`${path}: change watcher`, log);
  const watcher = createChangeWatcher(db, path, {
    fallbackMs: opts.watchFallbackMs,
    readonly,
    onTick: (renamed) => guard?.check(renamed),
    onError: (err) => watchFault.failed(fail(err, 'watch')),
    onRecovered: () => watchFault.ok(),
  });

  // One reusable wrapper: better-sqlite3 rolls back when the body throws. The body and its
  // arguments are passed through, so a write allocates no closure for it.
  const tx = db.transaction((body: (events: TaskEvent[], now: number) => unknown, events: TaskEvent[], at: number) => body(events, at));

  // The background checkpointer starts with the first writes that show this process writes
  // steadily (a one-shot CLI command never starts a thread for it).
  let checkpointer: Checkpointer | undefined;
  let commits = 0;
  const background = file && !readonly && opts.checkpoints !== 'inline';
  // Runs after a commit: it must not throw, or a committed write would be reported failed.
  // The threads of a process that share a write lock share one checkpointer too (the first
  // background store to get there starts it; a daemon's threads count their commits for
  // its main thread's): three checkpointers of one file took more CPU than the daemon's runs
  // on a two-core machine.
  const shared = lock !== undefined && lock.length > 3;
  const committed = (): void => {
    if (shared) countCommit(lock);
    if (checkpointer !== undefined) {
      if (!shared) checkpointer.noteCommit();
    } else if (background && (shared ? Atomics.load(lock, 3) >= CHECKPOINTER_AFTER : ++commits === CHECKPOINTER_AFTER) && claimCheckpointer(lock)) {
      try {
        checkpointer = startCheckpointer(resolve(path), opts.durability, undefined, undefined, shared ? lock : undefined);
      } catch {
        // No worker thread: SQLite's inline auto-checkpoint stays in charge.
      }
    }
  };
  // A store that stops writing stops its checkpointer too (its connection holds the same
  // log), and tells the other threads sharing its lock to stop before their next write.
  guard?.onTrip((f) => {
    raiseSharedFault(lock, f.code === 'STORE_CORRUPT' ? SHARED_FAULT.corrupt : SHARED_FAULT.replaced);
    const c = checkpointer;
    checkpointer = undefined;
    void c?.close();
  });
  /** The fault another thread of this process raised, latched in this store's guard too. */
  const sharedStop = (what: string): EngineError => {
    const corrupt = sharedFault(lock) === SHARED_FAULT.corrupt;
    guard?.trip(storeFault(corrupt ? 'STORE_CORRUPT' : 'STORE_REPLACED', path, what,
      `another thread of this process found the database ${corrupt ? 'corrupt' : 'file or its -wal deleted or replaced'}; this one writes nothing more either`, { relayed: true }));
    return guard!.fault!;
  };

  /** What must hold before a write (the files are ours, there is space); outside the write lock. */
  function precheck(what: string): void {
    if (guard !== undefined) {
      // Another thread stopped: look at the files for this store's own account first.
      if (sharedFault(lock) !== 0 && guard.fault === undefined && guard.check(true) === undefined) sharedStop(what);
      guard.beforeWrite();
    }
    space?.beforeWrite();
  }

  /** The transaction, with the process's write lock held (or no lock to hold). */
  function locked<T>(what: string, fn: (events: TaskEvent[], now: number) => T, spinMs: number): Committed<T> {
    if (guard !== undefined && sharedFault(lock) !== 0) throw guard.fault ?? sharedStop(what);
    const events: TaskEvent[] = [];
    // Busy (another process writes): BEGIN IMMEDIATE failed at once and wrote nothing; try
    // again in a moment. `now` is taken per try, so a retried write records when it ran.
    const value = spinOnBusy(() => {
      events.length = 0;
      takeWakes(db); // what a try that rolled back touched is not touched
      return tx.immediate(fn, events, now()) as T;
    }, spinMs);
    committed();
    return { value, events, wakes: takeWakes(db) };
  }

  /**
   * After a commit, outside the lock: wakes this connection's subscribers, and the claimers
   * of every process when the commit may have made a task claimable (wake-files.ts).
   */
  function announce<T>(c: Committed<T>): WriteOutcome<T> {
    const work = withQueues(workWakeOf(c.events, c.wakes?.work === true), c.wakes?.queues);
    if (work !== undefined) wakeClaimers(work);
    if (c.wakes?.controls === true) signal('controls');
    else if (work === undefined && c.events.length > 0) watcher.notifyLocal();
    return { value: c.value, events: c.events };
  }

  /** Wakes `topic`'s watchers in every process (its wake file) and on this connection. */
  function signal(topic: WakeTopic): void {
    if (topic === 'work') return wakeClaimers({ all: true });
    if (file && !readonly) signalWake(path, topic);
    watcher.notifyLocal([topic]);
  }

  /** Wakes the claimers `work` names in every process (their queues' wake files) and on this connection. */
  function wakeClaimers(work: WorkWake): void {
    if (file && !readonly) {
      if (work.all) signalWake(path, 'work');
      else for (const bucket of wakeBuckets(work.queues)) signalWake(path, 'work', bucket);
    }
    watcher.notifyLocal([], work);
  }

  function attempt<T>(what: string, fn: (events: TaskEvent[], now: number) => T, spinMs: number): Committed<T> {
    precheck(what);
    return withWriteLock(lock, () => locked(what, fn, spinMs));
  }

  function writeNow<T>(what: string, fn: (events: TaskEvent[], now: number) => T): Promise<WriteOutcome<T>> {
    if (readonly) return Promise.reject(storeFault('STORE_READONLY', path, what, 'this store opened the file read-only'));
    let outcome: Committed<T>;
    try {
      precheck(what);
      // Another thread of this process is writing: wait for it without blocking this thread,
      // whose other runs go on meanwhile (a daemon thread holds many), then try again.
      if (lock !== undefined && !tryWriteLock(lock)) return whenUnlocked(lock).then(() => writeNow(what, fn));
      try {
        outcome = locked(what, fn, WRITE_SPIN_MS);
      } finally {
        if (lock !== undefined) releaseWriteLock(lock);
      }
    } catch (err) {
      // Lock contention: retry with backoff (asynchronously). Anything else is the caller's.
      if (!isBusyError(err)) return Promise.reject(fail(err, what));
      return retryBusy(() => attempt(what, fn, 1), what).then(announce, (e: unknown) => Promise.reject(fail(e, what)));
    }
    return Promise.resolve(announce(outcome));
  }

  const group = opts.groupCommit === true && !readonly ? createGroupCommit(db, writeNow, fail, lock) : undefined;
  const write = group?.write ?? writeNow;

  function read<T>(what: string, fn: () => T): T {
    try {
      return readOnBusy(fn, what);
    } catch (err) {
      throw fail(err, what);
    }
  }

  return {
    db,
    path,
    now,
    readonly,
    write,
    read,
    get fault() {
      return guard?.fault;
    },
    onFault: (listener) => guard?.onTrip(listener) ?? (() => undefined),
    quickCheck: () => {
      try {
        quickCheck(db, path);
      } catch (err) {
        throw fail(err, 'quick_check');
      }
    },
    info: async () =>
      read('info', () => ({
        kind: 'sqlite' as const,
        location: path,
        version: db.prepare<[], string>('SELECT sqlite_version()').pluck().get()!,
        schemaVersion: db.pragma('user_version', { simple: true }) as number,
        knownSchemaVersion: MIGRATIONS.length,
        readonly,
        // One file on one machine: processes meet at its lock (one writer at a time), see each
        // other's commits through a watch of its folder, and a dead daemon is known by its pid.
        capabilities: { multipleHosts: false, pidLiveness: true, pushWakeups: true, skipLocked: false },
      })),
    clock: async () => now(),
    createTasks: (inputs, creator) => write('create', (events, at) => create(inputs, creator, at, events)),
    claim: (input) => write('claim', (events, at) => claim(input, at, events)),
    claimable: async (input) => {
      const parsed = parseClaimInput(input);
      return read('claim', () => anyClaimable(parsed, now()));
    },
    heartbeat: async (input) => {
      const { value } = await write('heartbeat', (_events, at) => heartbeat(input, at));
      return { leaseExpiresAt: value };
    },
    transition: (input) => write('transition', (events, at) => transition(input, at, events)),
    sweep: (o: SweepOptions) => sweepInBatches((cursor, skip) => write('sweep', (events, at) => sweep(o.graceMs, at, events, cursor, skip))),
    getTask: async (id, withEvents, reader) => read('read task', () => reads.getTask(id, withEvents, reader)),
    findTasks: async (query) => read('list tasks', () => reads.findTasks(query)),
    readEvents: async (query: ReadEventsQuery) => read('read events', () => reads.readEvents(query)),
    stats: async () => read('stats', () => reads.stats()),
    lastEventId: async () => read('last event', () => reads.lastEventId()),
    watch: (onChange, topic, queue) => watcher.subscribe(onChange, topic, queue),
    watchControls: (onChange) => watcher.subscribe(onChange, 'controls'),
    signal,
    close: async () => {
      await group?.drain();
      watcher.close();
      space?.close();
      // The checkpointer's connection closes first, so this one is the last and its close
      // checkpoints the WAL and removes it as before.
      await checkpointer?.close();
      // Closing checkpoints: a connection whose -wal was orphaned, and that could neither copy
      // it back nor cut it (guard.ts: prepareClose), is left open rather than let that
      // checkpoint copy the orphan over the file. (process.exit() leaves it unclosed too.)
      if (guard !== undefined && !guard.prepareClose()) return;
      if (db.open) db.close();
    },
  };
}
