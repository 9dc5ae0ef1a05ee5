/**
 * Every error code the engine can refuse with, in one registry. Codes are stable: users
 * and agents match on them. The README's error table is checked against this list by a test.
 */
export const ERROR_CODES = {
  TASK_NOT_FOUND: 'No task has the given id.',
  INVALID_TRANSITION: 'The state machine has no move from the task\'s current state to the requested one.',
  FORBIDDEN: 'The actor may not make this change (the move belongs to the assignee, the creator, an operator or the system).',
  VALIDATION_FAILED: 'The input is malformed: a wrong type, a missing field, a value out of range or over a size limit.',
  STALE_CLAIM: 'The claim token is not the task\'s current one: the lease was lost and the task reclaimed.',
  DEPENDENCY_CYCLE: 'The dependencies given would form a cycle.',
  STORE_BUSY: 'The database stayed locked through every retry, or cancelled the statement (PostgreSQL: statement_timeout, lock_timeout); nothing was written.',
  RUN_NOT_FOUND: 'No run has the given id.',
  APPROVAL_NOT_FOUND: 'No approval has the given id.',
  TOOL_FAILED: 'A tool call failed for a reason of its own; the message names the tool and the cause.',
  TOOL_OUTCOME_UNKNOWN: 'A tool call ended without knowing whether it took effect (it timed out, was stopped mid-call, or its tool says so); a write of unknown outcome is never repeated unasked.',
  DESKTOP_UNAVAILABLE: 'A desktop tool found no live X display (or could not load nut.js); the step fails, the daemon goes on.',
  RESERVED_NAME: 'The name is reserved for the operator or a system actor; no agent or reviewer may bear it.',
  MODEL_LACKS_VISION: 'An llm card observes by screenshot but its model is not listed as vision-capable; refused before the run starts.',
  STORE_FULL: 'The disk holding the database is full: the write was rolled back whole; the store frees the WAL and writes again once space returns.',
  STORE_READONLY: 'The database file (or its folder, -wal or -shm) may not be written by this process, or was opened read-only; reads still work.',
  STORE_CORRUPT: 'The file is not a database, or a page of it is damaged (SQLite reported corruption, or quick_check failed); from then on this process writes nothing to it.',
  STORE_REPLACED:
    "The database file or its -wal was deleted, moved or replaced while open; from then on this process writes nothing to it. On PostgreSQL: taskloop's tables are gone from under an open store (its schema dropped, or a pooler reset the session's search path), or its schema was replaced by another of the same name; a daemon stops.",
  STORE_TOO_NEW: 'The file\'s schema version is newer than this taskloop knows; it was not opened for writing and nothing was written.',
  STORE_NOT_FOUND: 'A command that only reads was pointed at a path with no database; nothing was created.',
  STORE_UNSAFE: 'The database (or a backup), its -wal or -shm, or a folder holding it belongs to another user or may be written by others (or by a group that is not its owner\'s choice), so another local user could read or change every task; nothing was written.',
  STORE_IO: 'The operating system failed a read or write of the database file (an I/O error, or the file cannot be opened).',
  STORE_UNAVAILABLE: 'The database server could not be reached, refused the login, dropped the connection, or did not give it the settings taskloop asked for (a pooler that drops the startup options); a write it cut off may or may not have committed (read before retrying).',
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface SerializedError {
  code: ErrorCode;
  message: string;
  data?: Record<string, unknown>;
}

/** The one error class of the engine. Never rely on instanceof across threads: use `isEngineError`. */
export class EngineError extends Error {
  readonly code: ErrorCode;
  readonly data: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, data?: Record<string, unknown>) {
    super(message);
    this.name = 'EngineError';
    this.code = code;
    this.data = data;
  }

  toJSON(): SerializedError {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }

  /** Rebuilds an error that crossed a thread or process boundary. */
  static from(value: SerializedError): EngineError {
    return new EngineError(value.code, value.message, value.data);
  }
}

/** One readable line for any error: `CODE: message` for an engine error, else its message. */
export function describeError(err: unknown): string {
  if (isEngineError(err)) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.message;
  if (typeof err === 'object' && err !== null) {
    const { code, message } = err as { code?: unknown; message?: unknown };
    if (typeof message === 'string') return typeof code === 'string' ? `${code}: ${message}` : message;
    try {
      return JSON.stringify(err);
    } catch {
      return Object.prototype.toString.call(err);
    }
  }
  return String(err);
}

/**
 * The form an error takes to cross a thread: an engine error as `{code, message, data}` (a
 * structured clone keeps only an Error's message, and turns an object that merely inherits
 * from Error — better-sqlite3's SqliteError — into an empty one), anything else as an Error
 * carrying its readable line. `fromThread` rebuilds it on the other side.
 */
export function toThread(err: unknown): SerializedError | Error {
  if (isEngineError(err)) return EngineError.from(err).toJSON();
  return new Error(describeError(err));
}

export function fromThread(value: unknown): Error {
  if (isEngineError(value)) return EngineError.from(value);
  return value instanceof Error ? value : new Error(describeError(value));
}

export function isEngineError(value: unknown): value is EngineError {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { code?: unknown }).code === 'string' &&
    (value as { code: string }).code in ERROR_CODES &&
    typeof (value as { message?: unknown }).message === 'string'
  );
}
