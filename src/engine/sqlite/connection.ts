/**
 * Opening a SQLite file the way every taskloop connection must: WAL, busy_timeout,
 * foreign keys, the chosen durability, migrations applied. One connection per thread.
 * This is the only module besides the SQLite adapters that imports better-sqlite3.
 *
 * Contract of opening (read-write):
 * - a file whose schema version is above what this build knows is refused with
 *   STORE_TOO_NEW before anything is written (no migration, no WAL switch, no page size);
 * - a file whose live connection lost its `-wal` is refused with STORE_REPLACED (guard.ts);
 * - every SQLite fault is an engine error naming the file (faults.ts).
 * Read-only (`readonly: true`): the file must exist (STORE_NOT_FOUND; nothing is created,
 * not even its folder); a reader that may not create the `-shm` beside a file no process has
 * open reads a snapshot of it instead; a file that needs migrating is opened read-write.
 */
import Database from 'better-sqlite3';
import { closeSync, constants, existsSync, fchmodSync, lstatSync, mkdirSync, openSync, readFileSync, readlinkSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EngineError } from '../errors.js';
import { fsFault, sqliteCode, storeError, storeFault } from './faults.js';
import { unsafeFolder } from './folder-check.js';
import { lockHolders, orphanedWal } from './guard.js';
import { MIGRATIONS, migrate } from './migrations.js';

export type Db = Database.Database;

const WAL_AUTOCHECKPOINT_BYTES = 16 * 1024 * 1024;
export type Durability = 'normal' | 'full';

export interface OpenOptions {
  /** Path of the database file; created with its folder when missing. */
  path: string;
  /** `normal` (synchronous=NORMAL: a power loss may lose the last commits, never corrupt) or `full`. @defaultValue 'normal' */
  durability?: Durability;
  /** How long one statement waits for the write lock before SQLITE_BUSY. @defaultValue 5000 */
  busyTimeoutMs?: number;
  /** Open for reading only (see the module's contract). @defaultValue false */
  readonly?: boolean;
}

const BUSY_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_LOCKED']);

/**
 * Where a database file really is: SQLite follows a symlink to the file (and to its folder)
 * and keeps its -wal and -shm beside the target, so the store's own files and checks (the
 * guard's look at the -wal, the wake files, the token file) must name that place too. Beside
 * the link, the guard watched a -wal that never existed and missed the real one's deletion.
 * A file not there yet is its folder's real path and its name; `:memory:` stays as it is.
 */
export function databasePath(path: string): string {
  if (path === ':memory:') return path;
  // The links to the file itself, a dangling one too (SQLite creates the file it names).
  let at = resolve(path);
  for (let hops = 0; hops < 40; hops++) {
    try {
      if (!lstatSync(at).isSymbolicLink()) break;
      at = resolve(dirname(at), readlinkSync(at));
    } catch {
      break; // not there (yet)
    }
  }
  let real: string;
  try {
    real = join(realpathSync(dirname(at)), basename(at));
  } catch {
    return path;
  }
  // No link on the way: the path as given (relative paths stay relative in messages).
  return real === resolve(path) ? path : real;
}

export function isBusyError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && BUSY_CODES.has(code);
}

/** Runs `fn` again on SQLITE_BUSY with jittered exponential backoff; other errors pass. */
export async function retryBusy<T>(fn: () => T, what: string, maxWaitMs = 60_000): Promise<T> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err)) throw err;
      if (Date.now() - started > maxWaitMs) {
        throw new EngineError('STORE_BUSY', `${what}: the database stayed locked for ${maxWaitMs} ms; nothing was written`);
      }
      // Short and jittered: the lock is usually free again within a millisecond (busy.ts).
      const cap = Math.min(20, 2 ** Math.min(attempt, 5));
      await sleep(Math.random() * cap);
    }
  }
}

/** Synchronous variant for start-up paths that cannot await (opening, migrating). */
function retryBusySync<T>(fn: () => T, maxWaitMs = 60_000): T {
  const started = Date.now();
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err) || Date.now() - started > maxWaitMs) throw err;
      Atomics.wait(cell, 0, 0, 1 + Math.random() * Math.min(100, 2 ** attempt));
    }
  }
}

/** Refuses a file whose schema is newer than this build knows, before anything is written. */
function checkSchema(db: Db, path: string): number {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > MIGRATIONS.length) {
    throw storeFault(
      'STORE_TOO_NEW',
      path,
      'open',
      `the file's schema is version ${version}, newer than version ${MIGRATIONS.length} that this taskloop knows; nothing was written (use the taskloop that wrote it, or a newer one)`,
      { schema_version: version, known_version: MIGRATIONS.length },
    );
  }
  return version;
}

function connect(path: string, what: string, readonly: boolean): Db {
  try {
    return new Database(path, { readonly, fileMustExist: readonly });
  } catch (err) {
    throw storeError(err, path, what);
  }
}

/**
 * A database file this store creates is its owner's alone: mode 0600 whatever the umask, in
 * folders it makes 0700. The file holds every card, tool argument and tool result, and with
 * the usual umask 022 SQLite would make it readable by every local user. Its `-wal` and
 * `-shm` follow: SQLite gives them the database file's own mode. A file or folder that
 * exists keeps its mode (sharing it with a group is the owner's choice: chmod). An empty file
 * is a new database to SQLite, so the page size and WAL still apply when it opens.
 */
function createPrivately(path: string): void {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o600);
  } catch (err) {
    // There already (or a symlink, which SQLite follows as it always did).
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return;
    throw fsFault(err, path, 'create the file');
  }
  try {
    fchmodSync(fd, 0o600); // a umask such as 0200 takes the owner's own bits off
  } finally {
    closeSync(fd);
  }
}

export function openDatabase(opts: OpenOptions): Db {
  const file = opts.path !== ':memory:'; // an in-memory database is all page cache: keep its defaults
  if (file && opts.readonly === true) return openReadOnly(opts);
  if (file) {
    const refused = orphanedWal(opts.path);
    if (refused !== undefined) throw refused;
    try {
      mkdirSync(dirname(opts.path), { recursive: true, mode: 0o700 });
    } catch (err) {
      throw fsFault(err, dirname(opts.path), 'create the folder');
    }
    // After the folder is made: one that someone else made first (a guessed name under
    // /tmp) is seen for what it is, and the file is then created where only we may write.
    const unsafe = unsafeFolder(databasePath(opts.path), 'open');
    if (unsafe !== undefined) throw unsafe;
    createPrivately(opts.path);
  }
  const db = connect(opts.path, 'open', false);
  try {
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    if (file) checkSchema(db, opts.path);
    // 1 KiB pages (applies when this call creates the file; an existing file keeps its own).
    // A commit writes one WAL frame per page it changed, and a task's two transactions change
    // about ten pages, each by a few dozen bytes: with 4 KiB pages most of the bytes written,
    // checksummed and synced at checkpoints were untouched content. Measured on the queue
    // bench: 1 KiB drains ~10% faster than 2 KiB and ~35% faster than 4 KiB. The price is
    // deeper b-trees (4 levels instead of 3 at a million tasks, still cached) and more
    // overflow pages for big cards. Rows just past 1 KiB (a one-tool run's task row with its
    // result) drain ~9% faster at 2 KiB, but rows of a few KiB ~20% slower and empty cards
    // ~9% slower (BENCHMARKS.md, session 26), so 1 KiB stays.
    if (file) db.pragma('page_size = 1024');
    // Several processes may open a fresh file at once: switching to WAL can hit SQLITE_BUSY.
    retryBusySync(() => db.pragma('journal_mode = WAL'));
    settle(db, opts);
    retryBusySync(() => migrate(db));
    return db;
  } catch (err) {
    db.close();
    throw storeError(err, opts.path, 'open');
  }
}

/** The settings every connection shares, read-write or not. */
function settle(db: Db, opts: OpenOptions): void {
  db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
  db.pragma('foreign_keys = ON');
  // The inline checkpoint is only the backstop of the background checkpointer (see
  // startCheckpointer): at 16 MiB of WAL instead of SQLite's 1000 pages (1 MiB here), so
  // the commit that runs it is rare (well under 0.1% of a task's commits) and finds little
  // left to copy. Without the checkpointer this is also the checkpoint interval: fewer,
  // larger checkpoints copy each hot page once per checkpoint instead of many times.
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_BYTES / (db.pragma('page_size', { simple: true }) as number)}`);
  // No mmap_size: it halves a million-task stats() (fewer pread calls), but every fetch
  // of a mapped page then looks the page up in the WAL index again, and the queue drain
  // measured ~4% slower with it. No temp_store either: no hot statement builds a temporary
  // b-tree (findTasks merges per-state pages in JS instead of sorting), and those that do
  // (the sweep's ORDER BY over the few leased tasks) stay in memory at this size anyway.
  // A 1 MiB page cache instead of this build's 16 MiB default: the pages a claim or a move
  // touches (a few root-to-leaf paths and the right edge of the event log) fit many times
  // over, and at the commit after any b-tree rebalance SQLite scans the cache's whole hash
  // table (it re-keys pages through the page number past the lock byte), so a big cache
  // makes those commits slower. Measured: 1 MiB drains 5-10% faster than 2 or 4 MiB (the
  // machine is noisy). The OS page cache still holds the file for bigger reads.
  if (db.name !== ':memory:') db.pragma('cache_size = -1000');
}

/** SQLite could not set up the shared index beside the file (no right to create the `-shm`). */
const NO_SHM = new Set(['SQLITE_READONLY_DIRECTORY', 'SQLITE_READONLY_CANTINIT', 'SQLITE_CANTOPEN']);

function openReadOnly(opts: OpenOptions): Db {
  const { path } = opts;
  if (!existsSync(path)) {
    throw storeFault('STORE_NOT_FOUND', path, 'open', 'no database there; a command that only reads creates nothing (task create, or the daemon, creates it)');
  }
  const refused = orphanedWal(path);
  if (refused !== undefined) throw refused;
  let db: Db | undefined;
  let version: number;
  try {
    db = connect(path, 'open', true);
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    version = checkSchema(db, path);
  } catch (err) {
    db?.close();
    // No -wal: no process has the file open and every committed page is in it. The snapshot
    // is that file as it is now; it does not follow later commits. (Never read beside a
    // connection of this process: closing the descriptor would drop that connection's locks.)
    const fallback = NO_SHM.has(sqliteCode(err) ?? '') && !existsSync(`${path}-wal`) && lockHolders(path) === 'nobody';
    if (!fallback) throw storeError(err, path, 'open');
    db = snapshot(path);
    version = checkSchema(db, path);
  }
  if (version < MIGRATIONS.length) {
    // An older schema: opening it read-write migrates it (as any open did before).
    db.close();
    return openDatabase({ ...opts, readonly: false });
  }
  settle(db, opts);
  return db;
}

/** The file read into memory, marked as a rollback-journal database (its WAL flag would make SQLite look for a -shm). */
function snapshot(path: string): Db {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw fsFault(err, path, 'read');
  }
  if (bytes.length >= 20 && bytes[18] === 2 && bytes[19] === 2) {
    bytes[18] = 1;
    bytes[19] = 1;
  }
  try {
    return new Database(bytes, { readonly: true });
  } catch (err) {
    throw storeError(err, path, 'open');
  }
}

/** The `PRAGMA data_version` of this connection: it changes when another connection commits. */
const versionStatements = new WeakMap<Db, Database.Statement<[], number>>();
export function dataVersion(db: Db): number {
  // Prepared once per connection: the watcher asks at every commit anywhere.
  let statement = versionStatements.get(db);
  if (statement === undefined) versionStatements.set(db, (statement = db.prepare<[], number>('PRAGMA data_version').pluck()));
  return statement.get()!;
}

