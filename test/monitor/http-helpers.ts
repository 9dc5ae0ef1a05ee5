/**
 * A real HTTP server on 127.0.0.1 over a fresh SQLite file (or the database it is given), and
 * a real SSE client on fetch.
 * Every request needs a credential: a test server keeps its generated operator token in
 * `<db>.http-token` like `taskloop serve`, and `op` / `auth` carry it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import {
  OPERATOR,
  type RunStore,
  type SqliteTaskStore,
  type TaskManager,
  createStores,
  createTaskManager,
  sameActor,
} from '../../src/engine/index.js';
import { isPostgresUrl } from '../../src/engine/stores.js';
import { type HttpServer, type HttpServerOptions, createHttpServer } from '../../src/monitor/http/server.js';
import { tokenFileFor } from '../../src/monitor/http/token-file.js';
import { tempDir, waitFor } from '../helpers.js';

/** A base URL and the headers every request to it carries (its credential). */
export interface Client {
  url: string;
  headers: Record<string, string>;
}

export interface TestServer {
  server: HttpServer;
  url: string;
  path: string;
  tm: TaskManager;
  runs: RunStore;
  /** SQLite's connection (undefined when `path` is a PostgreSQL URL). */
  db: SqliteTaskStore['db'];
  /** `Authorization: Bearer <the operator's token>` (none when the server has no operator token). */
  auth: Record<string, string>;
  /** The server, called as the operator. */
  op: Client;
}

/** `Authorization: Bearer <token>`. */
export const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

/**
 * Starts a server on port 0 (over `path` — a file or a postgres:// URL — or a new file); it and
 * its store are closed when the test finishes. Without `tokens` it generates its operator token
 * into `<path>.http-token` (for a URL, into a file in a temporary folder).
 */
export async function startServer(opts: Partial<HttpServerOptions> & { path?: string } = {}): Promise<TestServer> {
  const path = opts.path ?? join(tempDir(), 'http.db');
  const { store, runs } = createStores({ database: path });
  const tm = createTaskManager({ store });
  const tokenFile = isPostgresUrl(path) ? join(tempDir(), 'server.http-token') : tokenFileFor(path);
  let server: HttpServer;
  try {
    server = await createHttpServer({ tm, runs, port: 0, tokens: new Map(), tokenFile, ...opts });
  } catch (err) {
    await tm.close();
    throw err;
  }
  onTestFinished(async () => {
    await server.close(2000);
    await tm.close();
  });
  const token = server.tokenFile !== undefined
    ? readFileSync(server.tokenFile, 'utf8').trim()
    : [...(opts.tokens ?? [])].find(([, actor]) => sameActor(actor, OPERATOR))?.[0];
  const auth = token === undefined ? {} : bearer(token);
  return { server, url: server.url, path, tm, runs, db: (store as Partial<SqliteTaskStore>).db!, auth, op: { url: server.url, headers: auth } };
}

export interface ApiResult<T = any> {
  status: number;
  headers: Headers;
  json: T;
}

/**
 * One JSON request; `body` may be a string (sent as is) or a value (sent as JSON). A plain URL
 * sends no credential; a Client sends its headers (`headers` add to or override them).
 */
export async function api<T = any>(target: string | Client, method: string, path: string, body?: unknown, extra: Record<string, string> = {}): Promise<ApiResult<T>> {
  const base = typeof target === 'string' ? target : target.url;
  const headers = { ...(typeof target === 'string' ? {} : target.headers), ...extra };
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text === '' ? null : JSON.parse(text) };
}

export interface SseEvent {
  id?: number;
  event: string;
  data: any;
}

export interface SseClient {
  status: number;
  /** The JSON body when the server refused the stream. */
  error?: any;
  events: SseEvent[];
  /** Resolves when the server ends the stream (or the client closes it). */
  ended: Promise<void>;
  readonly done: boolean;
  /** Waits for the first event received that matches. */
  next(match: (e: SseEvent) => boolean, what: string, timeoutMs?: number): Promise<SseEvent>;
  /** The client goes away (aborts the request). */
  close(): void;
}

/** Opens an event stream with node's fetch and parses its messages as they arrive. */
export async function openStream(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const ac = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal });
  const events: SseEvent[] = [];
  let done = false;
  const client: SseClient = {
    status: res.status,
    events,
    ended: Promise.resolve(),
    get done() {
      return done;
    },
    next: (match, what, timeoutMs = 15_000) => waitFor(() => events.find(match), timeoutMs, `${what}; got ${events.map((e) => e.event).join(', ')}`),
    close: () => ac.abort(),
  };
  if (res.status !== 200 || !(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    const text = await res.text();
    client.error = text === '' ? null : JSON.parse(text);
    done = true;
    return client;
  }
  onTestFinished(() => ac.abort());
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  client.ended = (async () => {
    try {
      for (;;) {
        const { done: eof, value } = await reader.read();
        if (eof) break;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const parsed = parseFrame(frame);
          if (parsed !== undefined) events.push(parsed);
        }
      }
    } catch {
      // Aborted by close(): the client went away.
    } finally {
      done = true;
    }
  })();
  return client;
}

function parseFrame(frame: string): SseEvent | undefined {
  let id: number | undefined;
  let event = 'message';
  const data: string[] = [];
  for (const line of frame.split('\n')) {
    if (line.startsWith(':') || line.startsWith('retry:')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = Number(value);
    else if (field === 'event') event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length === 0) return undefined;
  return { id, event, data: JSON.parse(data.join('\n')) };
}

/** A valid scripted card (see test/workers/harness.ts card()). */
export function card(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    goal: 'http test',
    planner: 'scripted',
    allowed_tools: ['noop'],
    budget: { max_steps: 20 },
    acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
    script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
    ...over,
  };
}

/** A card whose run sits in one long `wait` call until it is stopped. */
export const waitCard = (ms = 60_000) => card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms } }, { action: 'done' }] });

/** Creates an attached task over HTTP and returns its id. */
export async function createAttached(target: Client, c: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<number> {
  const r = await api(target, 'POST', '/api/tasks', { title: 'attached', card: c, ...extra });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json.id as number;
}
