/**
 * The server's errors that are faults of the store, named with the engine's codes
 * (STORE_UNAVAILABLE, STORE_BUSY, STORE_REPLACED, …) and with what to look at; anything else
 * is returned as it is. What connection.ts retries (RETRIED) and when it does not reuse a
 * connection (isConnectionError, lostSession) are read from the same codes.
 */
import { EngineError, type ErrorCode, describeError } from '../errors.js';

/** A serialization failure or a deadlock: rolled back, nothing written, the work may run again. */
export const RETRIED: ReadonlySet<string> = new Set(['40001', '40P01']);

/**
 * A statement this connection prepared is not on the server's session (26000), or one of its
 * names already is on a session it never prepared it on (42P05): the session changed between
 * statements, as behind a pooler in transaction mode (PgBouncer), where `wakeups=poll`
 * (nothing prepared, no LISTEN) is the mode to use. The connection is not reused.
 */
const LOST_SESSION = new Set(['26000', '42P05']);
export const lostSession = (err: unknown): boolean => LOST_SESSION.has(String((err as { code?: unknown } | null)?.code));

const CONNECTION_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'EHOSTUNREACH']);

export function isConnectionError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (CONNECTION_CODES.has(code) || code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03')) return true;
  const message = (err as { message?: unknown } | null)?.message;
  return typeof message === 'string' && /Connection terminated|connection timeout|timeout exceeded when trying to connect/i.test(message);
}

/** SQLSTATE classes and codes that are faults of the server rather than refusals or bugs. */
function faultOf(err: unknown): ErrorCode | undefined {
  if (isConnectionError(err)) return 'STORE_UNAVAILABLE';
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return undefined;
  if (code === '28P01' || code === '28000' || code === '53300' || code.startsWith('57P') || LOST_SESSION.has(code)) return 'STORE_UNAVAILABLE';
  // A statement cancelled (statement_timeout, pg_cancel_backend) or a lock not had in time
  // (lock_timeout): the transaction is rolled back, nothing was written, try again later.
  // So is a serialization failure or a deadlock that was not run again (a multi-statement read).
  if (code === '57014' || code === '55P03' || RETRIED.has(code)) return 'STORE_BUSY';
  if (code === '3D000') return 'STORE_NOT_FOUND';
  // taskloop's tables are not on this session's path: its schema was dropped under it, or a
  // pooler reset the path. Like a SQLite file deleted while open: a daemon stops.
  if (code === '42P01' || code === '3F000') return 'STORE_REPLACED';
  if (code === '53100') return 'STORE_FULL';
  if (code === '25006' || code === '42501') return 'STORE_READONLY';
  if (code === 'XX001' || code === 'XX002') return 'STORE_CORRUPT';
  if (code.startsWith('58')) return 'STORE_IO';
  // A value the server cannot hold (a NUL in text or JSON, a number past a bigint): the
  // engine's checks refuse these first; this names any that slips past them, not INTERNAL.
  if (VALUE_REFUSED.has(code)) return 'VALIDATION_FAILED';
  return undefined;
}

/** character_not_in_repertoire, untranslatable_character, invalid_text_representation, numeric_value_out_of_range. */
const VALUE_REFUSED = new Set(['22021', '22P05', '22P02', '22003']);

/** What to do about a fault, where the server's own words do not say. */
function hintOf(err: unknown, code: ErrorCode): string {
  if (lostSession(err)) return ' (the server session changed between statements: behind a pooler in transaction mode, such as PgBouncer, add wakeups=poll to the URL)';
  if (/unsupported startup parameter/.test(String((err as { message?: unknown }).message))) {
    return ' (a pooler in between refuses the startup options taskloop sets its search path with: see "Behind a pooler" in the README)';
  }
  if (code === 'VALIDATION_FAILED') return ' (a value holds what PostgreSQL cannot store, such as a NUL character, or a number out of range; nothing was written)';
  if (code === 'STORE_REPLACED') return " (taskloop's tables are not on this session's search path: was its schema dropped, or does a pooler in between reset the path?)";
  return '';
}

/** The engine error for a server fault met doing `what`; anything else is returned as it is. */
export function pgFault(err: unknown, where: string, what: string): unknown {
  const code = faultOf(err);
  if (code === undefined) return err;
  const sqlstate = (err as { code?: unknown }).code;
  return new EngineError(code, `${what} on ${where}: ${describeError(err)}${hintOf(err, code)}`, { location: where, ...(typeof sqlstate === 'string' ? { sqlstate } : {}) });
}
