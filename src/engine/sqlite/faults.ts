/**
 * SQLite's faults, named. One mapping from better-sqlite3's SqliteError codes to the engine's
 * STORE_* codes, applied where the store runs statements (task-store.ts's write wrapper and
 * reads, and opening), so every adapter sharing a store gets it, and again at the surfaces
 * (CLI, HTTP, thread boundary) for statements an adapter runs on the connection itself.
 * Codes that mean a bug of ours (SQLITE_ERROR, SQLITE_CONSTRAINT, SQLITE_MISUSE …) pass
 * through unchanged: they are not faults of the file.
 */
import { EngineError, type ErrorCode, describeError } from '../errors.js';

/** SQLite's (extended) result code of a SqliteError, or undefined for any other value. */
export function sqliteCode(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : undefined;
}

/** The STORE_* code of a SQLite result code, or undefined when it is not a fault of the file. */
export function faultOf(code: string): ErrorCode | undefined {
  if (code === 'SQLITE_FULL') return 'STORE_FULL';
  if (code === 'SQLITE_READONLY_DBMOVED') return 'STORE_REPLACED';
  if (code.startsWith('SQLITE_READONLY')) return 'STORE_READONLY';
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') return 'STORE_CORRUPT';
  if (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED')) return 'STORE_BUSY';
  if (code === 'SQLITE_IOERR_NOMEM') return undefined;
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN') || code === 'SQLITE_PERM' || code === 'SQLITE_NOLFS' || code === 'SQLITE_PROTOCOL') {
    return 'STORE_IO';
  }
  return undefined;
}

const EXPLAIN: Partial<Record<ErrorCode, string>> = {
  STORE_FULL: 'the disk is full; nothing of this write was kept (free space: the store writes again without a restart)',
  STORE_READONLY: 'the file cannot be written by this process',
  STORE_CORRUPT: 'the database is corrupt; this process writes nothing more to it (restore it from a backup)',
  STORE_REPLACED: 'the database file was moved or replaced while open; this process writes nothing more to it',
  STORE_BUSY: 'the database is locked by another connection',
  STORE_IO: 'the operating system failed to read or write the file',
};

/** Codes after which a connection must not write again: what it would write lands in a damaged or orphaned file. */
export const FATAL_FAULTS: ReadonlySet<ErrorCode> = new Set<ErrorCode>(['STORE_CORRUPT', 'STORE_REPLACED']);

export function storeFault(code: ErrorCode, path: string, what: string, detail: string, data: Record<string, unknown> = {}): EngineError {
  return new EngineError(code, `${what} on ${path}: ${detail}`, { path, ...data });
}

/**
 * The engine error for a SQLite fault met while doing `what` on the file at `path`; any other
 * value (an EngineError, a bug's SqliteError, a TypeError) is returned as it is.
 */
export function storeError(err: unknown, path: string, what: string): unknown {
  const code = sqliteCode(err);
  if (code === undefined) return err;
  const fault = faultOf(code);
  if (fault === undefined) return err;
  const cause = String((err as { message?: unknown }).message ?? code);
  const explain = code.startsWith('SQLITE_CANTOPEN') ? 'the file cannot be opened (a missing folder, no permission, or not a file)' : EXPLAIN[fault];
  return storeFault(fault, path, what, `${explain} (${code}: ${cause})`, { sqlite_code: code });
}

/** The engine error for a failed file-system call (`fs.*`) on the database's files. */
export function fsFault(err: unknown, path: string, what: string): EngineError {
  const code = (err as NodeJS.ErrnoException | null)?.code ?? 'EIO';
  const fault: ErrorCode =
    code === 'ENOSPC' || code === 'EDQUOT' ? 'STORE_FULL'
    : code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? 'STORE_READONLY'
    : code === 'ENOENT' ? 'STORE_NOT_FOUND'
    : 'STORE_IO';
  return storeFault(fault, path, what, `${(err as Error | null)?.message ?? code}`, { errno: code });
}

export interface FaultReporter {
  /** Reports a failure: the first of a streak at once, later ones at most every `everyMs`, with a count. */
  failed(err: unknown): void;
  /** The activity works again: one line if it had failed. */
  ok(): void;
  /** Failures since the last success. */
  readonly failures: number;
}

/**
 * One readable line per streak of failures of something retried on a timer (a watcher poll,
 * a heartbeat), instead of a line per try; and one line when it works again. `fatal`: true
 * for a failure its caller stops on, which is then not reported here.
 */
export function faultReporter(what: string, log: (line: string) => void, everyMs = 30_000, fatal?: (err: unknown) => boolean): FaultReporter {
  let failures = 0;
  let lastLine = 0;
  let lastText = '';
  return {
    get failures() {
      return failures;
    },
    failed(err) {
      // A failure the caller takes as the end (it stops): not logged, not counted as a retry.
      if (fatal?.(err) === true) return;
      failures++;
      const text = describeError(err);
      const now = Date.now();
      if (failures === 1 || text !== lastText || now - lastLine >= everyMs) {
        log(`${what} failed${failures > 1 ? ` (${failures} times in a row)` : ''}: ${text}; retrying`);
        lastLine = now;
        lastText = text;
      }
    },
    ok() {
      if (failures > 0) log(`${what} works again after ${failures} failure${failures === 1 ? '' : 's'}`);
      failures = 0;
      lastText = '';
    },
  };
}
