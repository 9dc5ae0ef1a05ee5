/**
 * Errors of the HTTP surface. Every refusal is `{"error": {"code", "message"}}` with a
 * status: engine refusals keep their code (ERROR_CODES) and map to a status here; the
 * codes below are the surface's own (authentication, routing, body size, stream
 * ownership). A response never carries a stack trace.
 */
import { type ErrorCode, isEngineError, storeError } from '../../engine/index.js';

/** Codes only the HTTP surface uses, each documented. */
export const HTTP_ERROR_CODES = {
  UNAUTHORIZED: 'No valid credential was presented (a bearer token, or a session cookie with its key; for sign-in, a token or an unused sign-in code), on loopback too.',
  ORIGIN_REFUSED: 'The request came from a web page of another origin (or named a host that is not this server).',
  NOT_FOUND: 'No such endpoint.',
  METHOD_NOT_ALLOWED: 'The endpoint exists but not for this method.',
  PAYLOAD_TOO_LARGE: 'The request body is over the limit (1 MiB).',
  RUN_ACTIVE: 'The task’s run is active and already owned by a stream (or held by another process).',
  UNAVAILABLE: 'The server is shutting down and takes no new streams.',
  TOO_MANY_STREAMS: 'This identity already holds as many event streams and MCP sessions as one may (32); close one first.',
  INTERNAL: 'The server failed; the message says where. Nothing about its internals is exposed.',
} as const;

export type HttpErrorCode = keyof typeof HTTP_ERROR_CODES;

/** A refusal decided by the HTTP layer itself. */
export class HttpError extends Error {
  readonly status: number;
  readonly code: HttpErrorCode | ErrorCode;
  readonly headers: Record<string, string>;

  constructor(status: number, code: HttpErrorCode | ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

const ENGINE_STATUS: Record<ErrorCode, number> = {
  TASK_NOT_FOUND: 404,
  RUN_NOT_FOUND: 404,
  APPROVAL_NOT_FOUND: 404,
  INVALID_TRANSITION: 409,
  STALE_CLAIM: 409,
  FORBIDDEN: 403,
  RESERVED_NAME: 403,
  VALIDATION_FAILED: 400,
  DEPENDENCY_CYCLE: 400,
  STORE_BUSY: 503,
  TOOL_FAILED: 502,
  TOOL_OUTCOME_UNKNOWN: 504,
  DESKTOP_UNAVAILABLE: 503,
  MODEL_LACKS_VISION: 422,
  // The store's faults are the server's, not the request's: retry later (or elsewhere).
  STORE_FULL: 503,
  STORE_READONLY: 503,
  STORE_CORRUPT: 503,
  STORE_REPLACED: 503,
  STORE_TOO_NEW: 503,
  STORE_NOT_FOUND: 503,
  STORE_IO: 503,
  STORE_UNSAFE: 503,
  STORE_UNAVAILABLE: 503,
};

export interface ErrorReply {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: string; message: string } };
}

/**
 * The response for anything a handler threw. Unknown errors become a 500 whose message
 * names only the request, never the cause's text or stack (`log` gets the detail).
 */
export function errorReply(thrown: unknown, where: string, log: (line: string) => void): ErrorReply {
  // A SQLite fault from a statement an adapter ran on the connection itself gets its name here.
  const err = storeError(thrown, 'the database', where);
  if (err instanceof HttpError) {
    return { status: err.status, headers: err.headers, body: { error: { code: err.code, message: err.message } } };
  }
  if (isEngineError(err)) {
    return { status: ENGINE_STATUS[err.code] ?? 500, headers: {}, body: { error: { code: err.code, message: err.message } } };
  }
  log(`${where} failed: ${err instanceof Error ? err.message : String(err)}`);
  return { status: 500, headers: {}, body: { error: { code: 'INTERNAL', message: `${where} failed` } } };
}
