/**
 * The HTTP API and its event streams (DESIGN §7, issue 5 §1) on node:http — no framework:
 * a dozen routes, JSON bodies checked by zod, and long-lived SSE responses need nothing a
 * framework would add, and node:http gives direct control of the stream's socket.
 *
 * Every request but the board page and sign-in needs a credential (auth.ts): loopback is no
 * credential. Requests are routed (router.ts) and answered with JSON or
 * `{"error": {"code", "message"}}` (errors.ts). Extra routes — GET /metrics, a board — are
 * mounted with `extraRoutes` and go through the same authentication and error handling.
 */
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { type Actor, type BreakerPolicy, OPERATOR, type RunStore, type TaskManager } from '../../engine/index.js';
import type { PluginSpec } from '../../plugins/load.js';
import { type TokenTable, createAuthenticator, serverTokens, tokensFromEnv } from './auth.js';
import { HttpError, errorReply } from './errors.js';
import { eventsHandler } from './event-stream.js';
import { createLoopHost } from './loop-host.js';
import { ANONYMOUS, type Reply, type Route, createRouter } from './router.js';
import { type McpEndpointOptions, createMcpEndpoint } from './mcp-endpoint.js';
import { SESSION_KEY_PARAM, createSessions, sessionRoutes } from './session.js';
import { createActorSlots } from './slots.js';
import { createSignInCodes } from './signin-codes.js';
import { type RunOwner, createRunOwner } from './run-owner.js';
import { runRoutes } from './run-routes.js';
import { type SseOptions, type SseStream, openSse } from './sse.js';
import { taskRoutes } from './task-routes.js';
import { taskEventsHandler } from './task-stream.js';

export { MAX_STREAMS_PER_ACTOR } from './slots.js';

export interface HttpServerOptions {
  tm: TaskManager;
  runs: RunStore;
  /** @defaultValue '127.0.0.1' */
  host?: string;
  /** 0 picks a free port. @defaultValue 7070 */
  port?: number;
  /** Bearer tokens and the actors they map to. @defaultValue from TASKLOOP_TOKEN / TASKLOOP_TOKENS */
  tokens?: TokenTable;
  /**
   * Where a loopback server with no `tokens` keeps the operator token it generates (token-file.ts;
   * the CLI passes `<db>.http-token`). Without tokens and without this, the server refuses to start.
   * @defaultValue none
   */
  tokenFile?: string;
  /** The agent name attached tasks are claimed as. @defaultValue `http-<host>-<pid>` */
  agent?: string;
  /** Capabilities offered to attached tasks. @defaultValue none */
  capabilities?: string[];
  /** Lease of the claims of owned runs. @defaultValue 30000 */
  leaseMs?: number;
  /** Tool modules for owned runs, besides the built-in tools. @defaultValue none */
  toolModules?: string[];
  /** Plugins of owned runs. @defaultValue [task_enforcer] */
  plugins?: PluginSpec[];
  breaker?: Partial<BreakerPolicy>;
  /**
   * MCP over Streamable HTTP at POST/DELETE /mcp (mcp-endpoint.ts), for agent tokens; false
   * turns it off. @defaultValue the task tools, every call passing
   */
  mcp?: McpEndpointOptions | false;
  /** More routes (e.g. GET /metrics), behind the same authentication. */
  extraRoutes?: Route[];
  sse?: SseOptions;
  /** Clock of browser sessions, sign-in codes and MCP sessions, in epoch ms; tests pass their own. @defaultValue Date.now */
  now?: () => number;
  /** One line per notable thing. @defaultValue no logging */
  log?: (line: string) => void;
}

export interface HttpServer {
  /** e.g. `http://127.0.0.1:7070`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly owner: RunOwner;
  /** The owner-only file of the generated operator token, when the server uses one. */
  readonly tokenFile: string | undefined;
  /**
   * A link that signs a browser in as the operator once (`<url>/?signin=<code>`, good for
   * SIGNIN_CODE_MS), or undefined when no token of this server maps to the operator.
   */
  signInLink(): string | undefined;
  /** Stops listening, gives owned runs back at their next step (within `graceMs`), ends every stream. */
  close(graceMs?: number): Promise<void>;
}

const JSON_HEADERS = { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };

function write(res: ServerResponse, status: number, reply: Reply): void {
  const headers = 'json' in reply ? JSON_HEADERS : { 'Content-Type': reply.contentType, 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' };
  res.writeHead(status, { ...headers, ...reply.headers });
  res.end('json' in reply ? JSON.stringify(reply.json) : 'text' in reply ? reply.text : reply.body);
}

export async function createHttpServer(opts: HttpServerOptions): Promise<HttpServer> {
  const { tm, runs } = opts;
  const host = opts.host ?? '127.0.0.1';
  const log = opts.log ?? (() => undefined);
  const sessions = createSessions(opts.now);
  const codes = createSignInCodes(opts.now);
  const { tokens, tokenFile } = serverTokens({ host, tokens: opts.tokens ?? tokensFromEnv(), tokenFile: opts.tokenFile });
  const auth = createAuthenticator({ host, tokens, sessions });
  const agent = opts.agent ?? `http-${hostname()}-${process.pid}`;
  const capabilities = opts.capabilities ?? [];
  const loopHost = await createLoopHost({ tm, runs, agent, leaseMs: opts.leaseMs, toolModules: opts.toolModules, plugins: opts.plugins, breaker: opts.breaker, log });
  const owner = createRunOwner({ tm, runs, host: loopHost, agent, capabilities, leaseMs: opts.leaseMs, log });

  const streams = new Set<SseStream>();
  const slots = createActorSlots();
  const admit = slots.admit;
  const open = (req: IncomingMessage, res: ServerResponse, actor: Actor): SseStream => {
    const release = slots.take(actor);
    const stream = openSse(req, res, opts.sse);
    streams.add(stream);
    stream.signal.addEventListener('abort', () => {
      streams.delete(stream);
      release();
    });
    return stream;
  };
  const mcp = opts.mcp === false ? undefined : createMcpEndpoint({ tm, slots, log, ...(opts.now === undefined ? {} : { now: opts.now }), ...(opts.mcp ?? {}) });

  const router = createRouter([
    { method: 'GET', path: '/api/health', handler: async () => ({ json: { status: 'ok', agent, last_event_id: await tm.store.lastEventId(), owned_runs: owner.active() } }) },
    ...taskRoutes({ tm, runs, capabilities }),
    { method: 'GET', path: '/api/tasks/:id/events', handler: taskEventsHandler({ tm, runs, owner, open, admit }) },
    ...runRoutes(runs, tm),
    { method: 'GET', path: '/api/events', handler: eventsHandler(tm, open) },
    ...sessionRoutes(auth, sessions, codes),
    ...(mcp?.routes ?? []),
    ...(opts.extraRoutes ?? []),
  ]);

  let port = 0;
  const server = createServer((req, res) => void handle(req, res));
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const where = `${req.method ?? '?'} ${url.pathname}`;
    try {
      let matched;
      try {
        matched = router.match(req.method ?? 'GET', url.pathname);
      } catch (err) {
        // Credentials first: an unauthenticated caller learns nothing of which paths exist.
        auth.actorOf(req, port);
        throw err;
      }
      const { route, params } = matched;
      let actor = ANONYMOUS;
      if (route.public === true) auth.checkOrigin(req, port);
      else actor = auth.actorOf(req, port);
      // The session's key is a credential, not a parameter of the route (session.ts).
      url.searchParams.delete(SESSION_KEY_PARAM);
      const reply = await route.handler({ req, res, params, query: url.searchParams, actor });
      if (reply !== undefined) write(res, reply.status ?? 200, reply);
      else if (!res.headersSent) write(res, 204, { text: '', contentType: 'text/plain' });
    } catch (err) {
      const { status, headers, body } = errorReply(err, where, log);
      // A stream that fails after its headers went out can only be ended.
      if (res.headersSent) res.end();
      else write(res, status, { json: body, headers });
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 7070, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  port = address.port;
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  const url = `http://${shown}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    host: address.address,
    port,
    owner,
    tokenFile,
    signInLink: () => (auth.hasToken(OPERATOR) ? `${url}/?signin=${codes.issue(OPERATOR)}` : undefined),
    close(graceMs = 10_000) {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        // Owned runs are given back first (their streams end with them), so no stream
        // ending below looks like a client leaving, which would stop its run.
        await owner.close(graceMs);
        await mcp?.close();
        for (const s of [...streams]) s.end();
        server.closeAllConnections();
        await closed;
      })();
      return closing;
    },
  };
}
