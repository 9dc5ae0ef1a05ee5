/**
 * MCP over Streamable HTTP at `/mcp`, beside the API (DESIGN §7): the task tools for agents
 * on other machines, through the SDK's StreamableHTTPServerTransport.
 *
 * - **Who.** Every request needs `Authorization: Bearer <token>` (a browser's session cookie
 *   is not taken here), and the token's actor must be an agent: the session's server acts as
 *   that agent for every call, whatever the arguments say, and the engine's rules apply as
 *   over stdio. An operator's or reviewer's token is refused (403 FORBIDDEN): a model holding
 *   it would hold their powers (cards that run programs, reading everything).
 * - **Where from.** The server's own checks (auth.ts) run first: a foreign `Origin`, a
 *   cross-site `Sec-Fetch-Site`, or on loopback a `Host` that is not a loopback name (DNS
 *   rebinding) is 403 ORIGIN_REFUSED, as the MCP specification asks of local servers.
 * - **Sessions.** Stateful: `initialize` (POST without `Mcp-Session-Id`) opens a session with
 *   a random id, bound to the token's actor; a request with an id it does not know, or with
 *   another actor's id, is 404 `Session not found` (-32001), so an id is worth nothing without
 *   its token. Sessions share the per-identity count of event streams (slots.ts); at the
 *   limit the identity's least recently used idle session gives way, and when every slot is
 *   busy the new one is 429 TOO_MANY_STREAMS. A session ends on DELETE, after `idleMs`
 *   without a request, or when the server closes.
 * - **No server-initiated messages.** The server sends no notifications (no resources, no
 *   list changes), so GET /mcp (the standalone event stream) is 405 and responses are JSON.
 * - **Each body is judged as a stdio line is** (mcp-message.ts): at most 1 MiB (413), one
 *   message (a batch is -32600), params checked before the SDK sees them (-32602).
 * - **Strict schemas** when the client asks: `/mcp?schemas=strict` lists the tools' arguments
 *   in the form OpenAI's strict mode accepts, for the session it opens.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ErrorCode, type JSONRPCMessage, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { type Actor, EngineError, type TaskManager, sameActor } from '../../engine/index.js';
import type { McpGate } from '../../tools/mcp-call.js';
import { type ErrorReply, errorReply as rpcReply, judgeLine } from '../../tools/mcp-message.js';
import { SERVED_REQUESTS, createMcpServer } from '../../tools/mcp-server.js';
import { mcpTools, strictProblem } from '../../tools/mcp-tools.js';
import type { Tool } from '../../tools/registry.js';
import { HttpError } from './errors.js';
import { readBody } from './request.js';
import type { Route, RouteContext } from './router.js';
import { type ActorSlots, MAX_STREAMS_PER_ACTOR } from './slots.js';

export const MCP_PATH = '/mcp';
/** A session without a request for this long is closed. */
export const MCP_SESSION_IDLE_MS = 30 * 60 * 1000;

export interface McpEndpointOptions {
  /** The tools served (mcpTools). @defaultValue the task tools */
  tools?: Tool[];
  /** Judges every call (the CLI's: the plugins' tool_before hooks). @defaultValue every call passes */
  gate?: McpGate;
  /** @defaultValue MCP_SESSION_IDLE_MS */
  idleMs?: number;
}

interface Session {
  id: string;
  actor: Actor;
  server: Server;
  transport: StreamableHTTPServerTransport;
  /** Requests in flight. */
  busy: number;
  lastUsed: number;
}

export interface McpEndpoint {
  routes: Route[];
  /** Ends every session; no new one opens. */
  close(): Promise<void>;
}

function rpcError(res: ServerResponse, status: number, reply: ErrorReply): void {
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff' });
  res.end(JSON.stringify(reply));
}

const notFound = (res: ServerResponse) => rpcError(res, 404, rpcReply(null, -32001, 'Session not found: it ended, or it is not this token\'s; send initialize without Mcp-Session-Id to open one'));

export function createMcpEndpoint(opts: McpEndpointOptions & { tm: TaskManager; slots: ActorSlots; log: (line: string) => void; now?: () => number }): McpEndpoint {
  const tools = opts.tools ?? mcpTools();
  const idleMs = opts.idleMs ?? MCP_SESSION_IDLE_MS;
  const now = opts.now ?? Date.now;
  const live = new Map<string, Session>();
  let strictWhyNot: string | null | undefined;
  let closing = false;

  const end = async (session: Session) => {
    live.delete(session.id);
    await session.transport.close().catch(() => undefined);
  };
  const expired = (s: Session) => s.busy === 0 && now() - s.lastUsed > idleMs;
  // A returning client finds its expired session gone at once (sessionOf); the sweep frees those never asked for again.
  const sweep = setInterval(() => {
    for (const s of [...live.values()]) if (expired(s)) void end(s);
  }, Math.min(idleMs, 60_000));
  sweep.unref();

  /** The calling agent; the route's actor came from the token or a cookie (auth.ts). */
  const agentOf = (ctx: RouteContext): Actor => {
    if (ctx.req.headers.authorization === undefined) {
      throw new HttpError(401, 'UNAUTHORIZED', 'MCP takes a bearer token only: send Authorization: Bearer <an agent token>', { 'WWW-Authenticate': 'Bearer realm="taskloop"' });
    }
    if (ctx.actor.role !== 'agent') {
      throw new EngineError('FORBIDDEN', `MCP serves agents: a model holding ${ctx.actor.role} ${ctx.actor.id}'s token would hold its powers; give the agent a token of role agent (TASKLOOP_TOKENS)`);
    }
    return ctx.actor;
  };
  const sessionOf = (req: IncomingMessage, actor: Actor): Session | undefined => {
    const id = req.headers['mcp-session-id'];
    const session = typeof id === 'string' ? live.get(id) : undefined;
    if (session === undefined || !sameActor(session.actor, actor)) return undefined;
    if (expired(session)) {
      void end(session);
      return undefined;
    }
    return session;
  };

  const open = async (actor: Actor, query: URLSearchParams): Promise<Session> => {
    if (closing) throw new HttpError(503, 'UNAVAILABLE', 'the server is shutting down and opens no new MCP sessions');
    const schemas = query.get('schemas') ?? 'default';
    if (schemas !== 'default' && schemas !== 'strict') throw new EngineError('VALIDATION_FAILED', `${MCP_PATH}: schemas must be default or strict, not '${schemas.slice(0, 40)}'`);
    const strict = schemas === 'strict';
    if (strict) {
      strictWhyNot ??= strictProblem(tools);
      if (strictWhyNot !== null) throw new EngineError('VALIDATION_FAILED', `${MCP_PATH}?schemas=strict: ${strictWhyNot}`);
    }
    if (opts.slots.held(actor) >= MAX_STREAMS_PER_ACTOR) {
      const idle = [...live.values()].filter((s) => s.busy === 0 && sameActor(s.actor, actor)).sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (idle !== undefined) await end(idle);
    }
    const release = opts.slots.take(actor);
    const id = randomUUID();
    const server = createMcpServer({ agent: actor.id, manager: opts.tm, tools, gate: opts.gate, strict, log: opts.log });
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => id, enableJsonResponse: true });
    const session: Session = { id, actor, server, transport, busy: 0, lastUsed: now() };
    server.onclose = () => {
      live.delete(id);
      release();
    };
    try {
      await server.connect(transport);
    } catch (err) {
      release();
      throw err;
    }
    live.set(id, session);
    return session;
  };

  const serve = async (session: Session, req: IncomingMessage, res: ServerResponse, message?: JSONRPCMessage) => {
    session.busy++;
    session.lastUsed = now();
    res.once('close', () => {
      session.busy--;
      session.lastUsed = now();
    });
    await session.transport.handleRequest(req, res, message);
  };

  const post = async (ctx: RouteContext): Promise<void> => {
    const actor = agentOf(ctx);
    const text = await readBody(ctx.req);
    const verdict = judgeLine(text, SERVED_REQUESTS);
    if (verdict.type === 'reply') return rpcError(ctx.res, 400, verdict.reply);
    if (verdict.type === 'drop') return rpcError(ctx.res, 400, rpcReply(null, ErrorCode.InvalidRequest, `Invalid Request: ${verdict.why}`));
    const message = verdict.message;
    if (ctx.req.headers['mcp-session-id'] === undefined) {
      if (!isInitializeRequest(message)) {
        return rpcError(ctx.res, 400, rpcReply('id' in message ? (message.id ?? null) : null, -32000, 'Bad Request: no Mcp-Session-Id header; send initialize first to open a session'));
      }
      const session = await open(actor, ctx.query);
      try {
        return await serve(session, ctx.req, ctx.res, message);
      } finally {
        // An initialize the transport did not take leaves no session behind.
        if (session.transport.sessionId === undefined) await end(session);
      }
    }
    const session = sessionOf(ctx.req, actor);
    if (session === undefined) return notFound(ctx.res);
    await serve(session, ctx.req, ctx.res, message);
  };

  const remove = async (ctx: RouteContext): Promise<void> => {
    const session = sessionOf(ctx.req, agentOf(ctx));
    if (session === undefined) return notFound(ctx.res);
    await serve(session, ctx.req, ctx.res);
  };

  return {
    routes: [
      { method: 'POST', path: MCP_PATH, handler: post },
      { method: 'DELETE', path: MCP_PATH, handler: remove },
    ],
    async close() {
      closing = true;
      clearInterval(sweep);
      await Promise.all([...live.values()].map(end));
    },
  };
}
