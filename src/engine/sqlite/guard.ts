/**
 * The store guards its file. SQLite keeps writing into a `-wal` that was deleted (its
 * descriptor stays valid) while every process that opens the file afterwards starts a new
 * one beside the old `-shm`: two logs for one database, and the next checkpoint copies pages
 * of one into a file the index describes by the other (`file is not a database`). A file
 * renamed or replaced under an open connection, or a damaged page, is as bad to write on.
 *
 * Contract:
 * - A guard compares the identity (device, inode) of the main file and of the `-wal` it
 *   opened with what the paths name now. It looks before a write transaction at most once
 *   per `intervalMs`, and when the change watcher ticks or sees a file event; never per
 *   statement.
 * - Once tripped (a file vanished or replaced, or a statement met corruption) it stays
 *   tripped: every later write of this connection is refused with the fault. Nothing resets
 *   it but a new connection (a restart).
 * - A `-wal` deleted under this connection is copied back into the main file at once when
 *   no other connection can have used another log since (the path is still absent, so no
 *   one has opened the database since), by a TRUNCATE checkpoint from the descriptor this
 *   connection still holds: what was acknowledged before and after the deletion is kept.
 *   Otherwise the guard marks the connection unsafe to close (closing checkpoints, and would
 *   copy the orphaned log over the file).
 * - `orphanedWal` is the opener's side: a `-shm` that a live connection holds with no `-wal`
 *   beside it means that connection's log was deleted, and the database is refused rather
 *   than opened into a second log.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { EngineError } from '../errors.js';
import type { Db } from './connection.js';
import { storeFault } from './faults.js';

interface Identity {
  dev: number;
  ino: number;
}

function identity(path: string): Identity | undefined {
  try {
    const s = statSync(path);
    return { dev: s.dev, ino: s.ino };
  } catch {
    return undefined;
  }
}

const same = (a: Identity | undefined, b: Identity | undefined): boolean => a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino;

export interface FileGuard {
  /** The fault this connection tripped on, if any. */
  readonly fault: EngineError | undefined;
  /** True when closing the connection could copy an orphaned log over the file (see the contract). */
  readonly unsafeToClose: boolean;
  /** Throws the fault; otherwise looks at the files when the last look is older than intervalMs. */
  beforeWrite(): void;
  /** Looks at the files now (at most every intervalMs unless `force`); returns the fault, if any. */
  check(force?: boolean): EngineError | undefined;
  /** Latches a fault a statement met (corruption). The first fault wins. */
  trip(fault: EngineError): void;
  onTrip(listener: (fault: EngineError) => void): () => void;
  /**
   * Before closing: closing checkpoints, which must not copy an orphaned log over the file.
   * Tries the rescue once more; failing that, cuts the orphaned log this connection holds to
   * nothing (found through /proc/self/fd), so that checkpoint has no frame to copy. False
   * when neither worked: the connection must be left open (process.exit does not checkpoint).
   */
  prepareClose(): boolean;
}

/** Truncates the file this process holds open with identity `id` (deleted or not) through /proc/self/fd. */
function cutHeldFile(id: Identity): boolean {
  let fds: string[];
  try {
    fds = readdirSync('/proc/self/fd');
  } catch {
    return false;
  }
  for (const name of fds) {
    try {
      const s = fstatSync(Number(name));
      if (s.dev !== id.dev || s.ino !== id.ino) continue;
      const fd = openSync(`/proc/self/fd/${name}`, 'r+');
      try {
        ftruncateSync(fd, 0);
      } finally {
        closeSync(fd);
      }
      return true;
    } catch {
      // Not ours to look at (closed meanwhile): the next one.
    }
  }
  return false;
}

export interface GuardOptions {
  db: Db;
  path: string;
  /** @defaultValue 50 */
  intervalMs?: number;
  /**
   * Runs `fn` while no other thread of this process writes (the process's write lock), so a
   * rescue copies the deleted log back before another thread can append to it. @defaultValue fn()
   */
  exclusive?: <T>(fn: () => T) => T;
}

export function createFileGuard(opts: GuardOptions): FileGuard {
  const { db, path } = opts;
  const walPath = `${path}-wal`;
  const intervalMs = opts.intervalMs ?? 50;
  const exclusive = opts.exclusive ?? (<T>(fn: () => T): T => fn());
  const main = identity(path);
  let wal = identity(walPath);
  let fault: EngineError | undefined;
  let unsafeToClose = false;
  let lastLook = Date.now();
  const listeners = new Set<(fault: EngineError) => void>();

  const trip = (f: EngineError): void => {
    if (fault !== undefined) return;
    fault = f;
    for (const listener of [...listeners]) {
      try {
        listener(f);
      } catch {
        // A listener's failure must not keep the fault from the others.
      }
    }
  };

  /** Copies the deleted log back through this connection's descriptor; true when it all went in. */
  const rescue = (): boolean => {
    if (identity(walPath) !== undefined) return false;
    try {
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number; log: number; checkpointed: number }>;
      return r !== undefined && r.busy === 0;
    } catch {
      return false;
    }
  };

  const look = (): void => {
    lastLook = Date.now();
    if (fault !== undefined || !db.open) return;
    const nowMain = identity(path);
    if (!same(main, nowMain)) {
      // SQLite itself refuses to write (SQLITE_READONLY_DBMOVED) and skips the checkpoint
      // at close for a main file that moved: nothing to disarm.
      trip(storeFault('STORE_REPLACED', path, 'guard', `the database file was ${nowMain === undefined ? 'deleted or moved' : 'replaced by another file'} while open; this process writes nothing more to it`, { file: path }));
      return;
    }
    const nowWal = identity(walPath);
    if (wal === undefined) {
      wal = nowWal;
      return;
    }
    if (same(wal, nowWal)) return;
    // Rescue and trip under the process's write lock: no other thread of this process can
    // append to the orphaned log between the copy and the moment its store hears of the fault.
    exclusive(() => {
      const saved = nowWal === undefined && rescue();
      unsafeToClose = !saved;
      const how = nowWal === undefined ? 'deleted' : 'replaced by another file';
      const outcome = saved
        ? 'what it held was copied back into the database file; this process writes nothing more (restart it)'
        : 'what it held since the last checkpoint is lost to this process, which writes nothing more';
      trip(storeFault('STORE_REPLACED', path, 'guard', `${walPath} was ${how} while the database was open: ${outcome}`, { file: walPath, rescued: saved }));
    });
  };

  return {
    get fault() {
      return fault;
    },
    get unsafeToClose() {
      return unsafeToClose;
    },
    beforeWrite() {
      if (fault === undefined && Date.now() - lastLook >= intervalMs) look();
      if (fault !== undefined) throw fault;
    },
    check(force = false) {
      if (force || Date.now() - lastLook >= intervalMs) look();
      return fault;
    },
    trip,
    onTrip(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    prepareClose() {
      if (!unsafeToClose) return true;
      if (exclusive(rescue) || (wal !== undefined && cutHeldFile(wal))) unsafeToClose = false;
      return !unsafeToClose;
    },
  };
}

/** Runs `PRAGMA quick_check`; throws STORE_CORRUPT naming the first problems when it fails. */
export function quickCheck(db: Db, path: string): void {
  const rows = db.pragma('quick_check(5)') as Array<{ quick_check: string }>;
  const problems = rows.map((r) => r.quick_check).filter((m) => m !== 'ok');
  if (problems.length > 0) {
    throw storeFault('STORE_CORRUPT', path, 'quick_check', `the database is corrupt: ${problems.join('; ')} (restore it from a backup)`, { problems });
  }
}

// ---- the opener's side -------------------------------------------------------------------

/**
 * Who holds POSIX locks on the file (Linux's /proc/locks): this process, another one, nobody,
 * or unknown (no /proc). SQLite's live connections hold a read lock on the -shm's DMS byte.
 */
export function lockHolders(file: string): 'this process' | 'another process' | 'nobody' | 'unknown' {
  const id = identity(file);
  if (id === undefined) return 'nobody';
  let text: string;
  try {
    text = readFileSync('/proc/locks', 'utf8');
  } catch {
    return 'unknown';
  }
  let holder: 'another process' | 'nobody' = 'nobody';
  for (const m of text.matchAll(/^\d+: \S+\s+\S+\s+\S+\s+(\d+) [0-9a-f]+:[0-9a-f]+:(\d+) /gm)) {
    if (Number(m[2]) !== id.ino) continue;
    if (Number(m[1]) === process.pid) return 'this process';
    holder = 'another process';
  }
  return holder;
}

/**
 * Why the database at `path` must not be opened now, or undefined: its `-wal` is gone while a
 * live connection (a lock on the `-shm`) still writes into it, deleted under that connection.
 * Opening would start a second log beside the first. A clean close never looks like this (the
 * last connection removes the -shm before the -wal); a leftover `-shm` that no process holds
 * is no reason either: SQLite rebuilds it at open.
 *
 * It opens no file: POSIX drops every lock a process holds on a file when it closes any
 * descriptor of it, so reading the -shm beside a live connection of this process (another
 * thread's) would unlock that connection.
 */
export function orphanedWal(path: string): EngineError | undefined {
  const shm = `${path}-shm`;
  const walPath = `${path}-wal`;
  if (identity(shm) === undefined || identity(walPath) !== undefined) return undefined;
  const holders = lockHolders(shm);
  if (holders === 'nobody') return undefined;
  const who = holders === 'unknown' ? 'perhaps a process' : holders === 'this process' ? 'this process' : 'another process';
  return storeFault(
    'STORE_REPLACED',
    path,
    'open',
    `${walPath} is missing while ${shm} is there and ${who} has the database open: the -wal of a database in use was deleted; refused so as not to start a second log (stop the processes that have it open, then open it again; if none has, remove ${shm})`,
    { file: walPath },
  );
}
