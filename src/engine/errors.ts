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
  STORE_BUSY: 'The database stayed locked through every retry; nothing was written.',
  RUN_NOT_FOUND: 'No run has the given id.',
  APPROVAL_NOT_FOUND: 'No approval has the given id.',
  TOOL_FAILED: 'A tool call failed for a reason of its own; the message names the tool and the cause.',
  DESKTOP_UNAVAILABLE: 'A desktop tool found no live X display (or could not load nut.js); the step fails, the daemon goes on.',
  RESERVED_NAME: 'The name is reserved for the operator or a system actor; no agent or reviewer may bear it.',
  MODEL_LACKS_VISION: 'An llm card observes by screenshot but its model is not listed as vision-capable; refused before the run starts.',
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

export function isEngineError(value: unknown): value is EngineError {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { code?: unknown }).code === 'string' &&
    (value as { code: string }).code in ERROR_CODES &&
    typeof (value as { message?: unknown }).message === 'string'
  );
}
