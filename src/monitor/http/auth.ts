/**
 * Who is calling. Bound to a loopback address the server trusts the machine: a request
 * without a token acts as the operator. Bound anywhere else, every request must present
 * `Authorization: Bearer <token>` and the server refuses to start without a token set.
 *
 * Tokens map to the actor the engine's rules are decided on:
 * - `TASKLOOP_TOKEN` maps to the operator (`{id: 'operator', role: 'operator'}`);
 * - `TASKLOOP_TOKENS`, a JSON object `{"<token>": {"id": "<name>", "role": "operator" | "reviewer" | "agent"}}`,
 *   adds named identities (an agent token may stop or approve only what its creator rules allow).
 *   An agent's or reviewer's name must not be reserved, an operator's must not be a system
 *   actor's (actors.ts): such a table is refused with RESERVED_NAME.
 * A presented token that matches none is refused even on loopback. Browsers sign in once
 * and carry a session cookie instead (session.ts), since an EventSource sends no headers.
 *
 * Web pages are not callers: on loopback anyone's browser could otherwise reach the operator
 * (a form POST to stop-all, an <img> starting a run). A request whose `Origin` is not this
 * server, whose `Sec-Fetch-Site` says another site, or whose `Host` is not a name of this
 * loopback server (DNS rebinding) is refused.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { z } from 'zod';
import { type Actor, EngineError, OPERATOR, assertBindableName, isSystemName } from '../../engine/index.js';
import { HttpError } from './errors.js';
import { SESSION_COOKIE, type Sessions, cookieOf } from './session.js';

export type TokenTable = ReadonlyMap<string, Actor>;

const identity = z.strictObject({
  id: z.string().min(1).max(100).regex(/^[^\u0000-\u001f\u007f]+$/, 'no control characters'),
  role: z.enum(['operator', 'reviewer', 'agent']),
});
const tokenTable = z.record(z.string().min(16, 'tokens must be at least 16 characters'), identity);

/** The identity a TASKLOOP_TOKENS entry binds, checked against the reserved names (RESERVED_NAME). */
function bind(who: z.infer<typeof identity>, where: string): Actor {
  if (who.role !== 'operator') return { id: assertBindableName(who.id, where), role: who.role };
  if (isSystemName(who.id)) {
    throw new EngineError('RESERVED_NAME', `${where}: '${who.id}' is a system actor's name; an operator may not bear it either`, { name: who.id });
  }
  return { id: who.id, role: 'operator' };
}

/**
 * The tokens configured in the environment. Throws a one-line Error when they are malformed,
 * and an EngineError RESERVED_NAME when an entry takes a name it may not bear. Messages never
 * quote a token: they name an entry by its place.
 */
export function tokensFromEnv(env: NodeJS.ProcessEnv = process.env): Map<string, Actor> {
  const tokens = new Map<string, Actor>();
  const single = env.TASKLOOP_TOKEN;
  if (single !== undefined && single !== '') {
    if (single.length < 16) throw new Error('TASKLOOP_TOKEN must be at least 16 characters');
    tokens.set(single, OPERATOR);
  }
  const many = env.TASKLOOP_TOKENS;
  if (many !== undefined && many !== '') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(many);
    } catch {
      throw new Error('TASKLOOP_TOKENS is not valid JSON (expected {"<token>": {"id": "…", "role": "operator"|"reviewer"|"agent"}})');
    }
    const keys = parsed !== null && typeof parsed === 'object' ? Object.keys(parsed) : [];
    const entry = (token: string) => `TASKLOOP_TOKENS entry ${keys.indexOf(token) + 1}`;
    const table = tokenTable.safeParse(parsed);
    if (!table.success) {
      const issue = table.error.issues[0]!;
      const [token, ...field] = issue.path.map(String);
      throw new Error(`${token === undefined ? 'TASKLOOP_TOKENS' : entry(token)}: ${field.length > 0 ? `${field.join('.')}: ` : ''}${issue.message}`);
    }
    for (const [token, who] of Object.entries(table.data)) tokens.set(token, bind(who, entry(token)));
  }
  return tokens;
}

/** 127.0.0.0/8, ::1 (also v4-mapped) and `localhost`. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

export interface AuthOptions {
  /** The address the server is bound to. */
  host: string;
  tokens: TokenTable;
  /** Browser sessions (session.ts): a request without a header may carry a session cookie. */
  sessions?: Sessions;
  /** @defaultValue true unless `host` is a loopback address */
  requireToken?: boolean;
}

export interface Authenticator {
  readonly requireToken: boolean;
  /** The actor of a request, or an HttpError (401, or 403 for a foreign origin). */
  actorOf(req: IncomingMessage, port: number): Actor;
  /** Only the browser-origin checks, for routes that take no credentials (the board page, sign-in). */
  checkOrigin(req: IncomingMessage, port: number): void;
  /** The actor a token maps to, or undefined (compared in constant time). */
  authenticate(token: string): Actor | undefined;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function createAuthenticator(opts: AuthOptions): Authenticator {
  const requireToken = opts.requireToken ?? !isLoopback(opts.host);
  if (requireToken && opts.tokens.size === 0) {
    throw new Error(`refusing to serve on ${opts.host} without a token: set TASKLOOP_TOKEN (or TASKLOOP_TOKENS), or bind to 127.0.0.1`);
  }
  const table = [...opts.tokens].map(([token, actor]) => ({ hash: digest(token), actor }));
  const loopback = isLoopback(opts.host);

  // Compares against every token in constant time, so timing says nothing about which matched.
  const lookup = (token: string): Actor | undefined => {
    const presented = digest(token);
    let found: Actor | undefined;
    for (const entry of table) if (timingSafeEqual(entry.hash, presented)) found = entry.actor;
    return found;
  };

  return {
    requireToken,
    actorOf(req, port) {
      checkBrowserOrigin(req, loopback, port);
      const header = req.headers.authorization;
      if (header === undefined) {
        const session = cookieOf(req, SESSION_COOKIE);
        const signedIn = session === undefined ? undefined : opts.sessions?.actorOf(session);
        if (signedIn !== undefined) return signedIn;
        if (requireToken) throw unauthorized('this server requires Authorization: Bearer <token> (or a session: POST /api/session)');
        return OPERATOR;
      }
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (match === null) throw unauthorized('the Authorization header must be `Bearer <token>`');
      const actor = lookup(match[1]!);
      if (actor === undefined) throw unauthorized('the token is not valid');
      return actor;
    },
    checkOrigin: (req, port) => checkBrowserOrigin(req, loopback, port),
    authenticate: lookup,
  };
}

function unauthorized(message: string): HttpError {
  return new HttpError(401, 'UNAUTHORIZED', message, { 'WWW-Authenticate': 'Bearer realm="taskloop"' });
}

function checkBrowserOrigin(req: IncomingMessage, loopback: boolean, port: number): void {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    throw new HttpError(403, 'ORIGIN_REFUSED', `requests from other sites are refused (Sec-Fetch-Site: ${site})`);
  }
  const host = req.headers.host ?? '';
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== `http://${host}`) {
    throw new HttpError(403, 'ORIGIN_REFUSED', `requests from ${origin} are refused: only this server's own pages may call it`);
  }
  if (loopback && host !== '') {
    // A loopback server answers to loopback names only: a rebinding DNS name pointing at
    // 127.0.0.1 must not turn a web page into a same-origin caller.
    const name = host.replace(/:\d+$/, '');
    if (!isLoopback(name) || (/:\d+$/.test(host) && !host.endsWith(`:${port}`))) {
      throw new HttpError(403, 'ORIGIN_REFUSED', `host ${JSON.stringify(host)} is not this loopback server`);
    }
  }
}
