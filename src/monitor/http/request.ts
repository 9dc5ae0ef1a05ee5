/**
 * Reading a request at the edge: the JSON body (at most 1 MiB, else 413; nested at most
 * LIMITS.jsonDepth levels, else 400), parsed by a zod schema (else 400 VALIDATION_FAILED
 * naming the field), and ids from the path.
 */
import type { IncomingMessage } from 'node:http';
import type { z } from 'zod/v4';
import { type Actor, EngineError, LIMITS, type Task, type TaskManager, assertReadable, assertTextDepth } from '../../engine/index.js';
import { HttpError } from './errors.js';

/** The largest body any endpoint accepts. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** A body declared or found larger than this is not drained before the 413: the connection is closed. */
const MAX_DRAIN_BYTES = 16 * MAX_BODY_BYTES;

function tooLarge(closeConnection = false): HttpError {
  return new HttpError(413, 'PAYLOAD_TOO_LARGE', `the request body is over ${MAX_BODY_BYTES} bytes`, closeConnection ? { Connection: 'close' } : {});
}

/**
 * Reads the whole body as text. An oversized body is drained (so the client reads the 413
 * instead of a reset) unless it is far over the limit, then the connection is closed.
 */
export function readBody(req: IncomingMessage, limit = MAX_BODY_BYTES): Promise<string> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > MAX_DRAIN_BYTES) {
    return Promise.reject(tooLarge(true));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = declared > limit;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_DRAIN_BYTES) {
        req.pause();
        reject(tooLarge(true));
        return;
      }
      if (size > limit) over = true;
      if (!over) chunks.push(chunk);
    });
    req.on('end', () => (over ? reject(tooLarge()) : resolve(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

/** The body as JSON, parsed by `schema`; an empty body is `{}`. Depth is checked on the text, before anything walks it. */
export async function readJson<T>(req: IncomingMessage, schema: z.ZodType<T>, what: string): Promise<T> {
  const text = await readBody(req);
  let value: unknown = {};
  if (text.trim() !== '') {
    assertTextDepth(text, `${what}: the body`, LIMITS.jsonDepth);
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new EngineError('VALIDATION_FAILED', `${what}: the body is not valid JSON (${(err as Error).message.split('\n')[0]})`);
    }
  }
  return parseWith(schema, value, what);
}

/** Parses `value` or throws VALIDATION_FAILED with the first problem, naming the field as the client wrote it. */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const where = issue.path.length > 0 ? `${what}: ${issue.path.join('.')}` : what;
  throw new EngineError('VALIDATION_FAILED', `${where}: ${issue.message}`);
}

/** A positive integer id from the path. */
export function idParam(text: string | undefined, what: string): number {
  if (text === undefined || !/^\d{1,15}$/.test(text) || Number(text) < 1) {
    throw new EngineError('VALIDATION_FAILED', `${what}: '${text ?? ''}' is not a positive integer`);
  }
  return Number(text);
}

/**
 * The task, if `actor` may read it (the engine's rule, authority.ts `mayRead`); FORBIDDEN
 * otherwise. For routes that show a task's runs, steps, screen or events.
 */
export async function readableTask(tm: TaskManager, actor: Actor, taskId: number): Promise<Task> {
  const task = await tm.store.getTask(taskId, false);
  assertReadable(actor, task);
  return task;
}

/** Routes for people (operators, reviewers): an agent is refused. */
export function refuseAgents(actor: Actor, what: string): void {
  if (actor.role === 'agent') throw new EngineError('FORBIDDEN', `${what} is for operators and reviewers; agent ${actor.id} may read only the tasks it created, holds or may claim`);
}
