/**
 * Who is calling. No request acts as anyone without a credential, wherever the server is
 * bound: being able to reach 127.0.0.1 is not being the operator, since every local user can.
 * A request presents `Authorization: Bearer <token>` or the session cookie of a browser that
 * signed in (session.ts; an EventSource sends no headers); anything else is 401 UNAUTHORIZED.
 *
 * Tokens map to the actor the engine's rules are decided on:
 * - `TASKLOOP_TOKEN` maps to the operator (`{id: 'operator', role: 'operator'}`);
 * - `TASKLOOP_TOKENS`, a JSON object `{"<token>": {"id": "<name>", "role": "operator" | "reviewer" | "agent"}}`,
 *   adds named identities. An agent's or reviewer's name must not be reserved, an operator's
 *   must not be a system actor's (actors.ts): such a table is refused with RESERVED_NAME.
 * - With neither set, a loopback server makes an operator token in an owner-only file
 *   (token-file.ts); off loopback it refuses to start, since a token there must be chosen.
 * What each actor may then do is the engine's to decide; this module only binds the identity.
 *
 * Web pages are not callers: a browser holding a session must not be steered by another site
 * (a form POST to stop-all, an <img> starting a run). A request whose `Origin` is not this
 * server, whose `Sec-Fetch-Site` says another site, or whose `Host` is not a name of this
 * loopback server (DNS rebinding) is refused, credentials or not.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { z } from 'zod/v4';
import { type Actor, EngineError, OPERATOR, assertBindableName, isSystemName, sameActor } from '../../engine/index.js';
import { HttpError } from './errors.js';
import { SESSION_COOKIE, SESSION_KEY_HEADER, type Sessions, cookieOf, sessionKeyOf } from './session.js';
import { loadOrCreateTokenFile } from './token-file.js';

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

export interface ServerTokens {
  tokens: TokenTable;
  /** The owner-only file of a generated operator token, when the server uses one. */
  tokenFile?: string;
}

/**
 * The tokens a server on `host` accepts: those configured, else (on loopback) the operator
 * token of `tokenFile`, made when missing. Throws a one-line Error when there can be none.
 */
export function serverTokens(opts: { host: string; tokens: TokenTable; tokenFile?: string }): ServerTokens {
  if (opts.tokens.size > 0) return { tokens: opts.tokens };
  if (!isLoopback(opts.host)) {
    throw new Error(`refusing to serve on ${opts.host} without a token: set TASKLOOP_TOKEN (or TASKLOOP_TOKENS), or bind to 127.0.0.1`);
  }
  if (opts.tokenFile === undefined) {
    throw new Error('no token is configured: set TASKLOOP_TOKEN (or TASKLOOP_TOKENS), or give the server a token file to keep a generated one in');
  }
  const file = loadOrCreateTokenFile(opts.tokenFile);
  return { tokens: new Map([[file.token, OPERATOR]]), tokenFile: file.path };
}

export interface AuthOptions {
  /** The address the server is bound to. */
  host: string;
  /** At least one token (serverTokens). */
  tokens: TokenTable;
  /** Browser sessions (session.ts): a request without a header may carry a session cookie. */
  sessions?: Sessions;
}

export interface Authenticator {
  /** The actor of a request, or an HttpError (401 without a valid credential, 403 for a foreign origin). */
  actorOf(req: IncomingMessage, port: number): Actor;
  /** Only the browser-origin checks, for routes that take no credentials (the board page, sign-in). */
  checkOrigin(req: IncomingMessage, port: number): void;
  /** The actor a token maps to, or undefined (compared in constant time). */
  authenticate(token: string): Actor | undefined;
  /** Whether some token maps to exactly this actor. */
  hasToken(actor: Actor): boolean;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function createAuthenticator(opts: AuthOptions): Authenticator {
  if (opts.tokens.size === 0) throw new Error('an authenticator needs at least one token');
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
    actorOf(req, port) {
      checkBrowserOrigin(req, loopback, port);
      const header = req.headers.authorization;
      if (header === undefined) {
        const session = cookieOf(req, SESSION_COOKIE);
        if (session === undefined) throw unauthorized('no credential: send Authorization: Bearer <token>, or sign in (POST /api/session)');
        // The cookie alone may have been sent to another local user's page (session.ts).
        const key = sessionKeyOf(req);
        if (key === undefined) throw unauthorized(`a session cookie alone is no credential: send the key its sign-in gave too (${SESSION_KEY_HEADER})`);
        const signedIn = opts.sessions?.verify(session, key);
        if (signedIn !== undefined) return signedIn;
        throw unauthorized('the session is not valid (expired, signed out, from before a restart, or not this key\'s): sign in again');
      }
      const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (match === null) throw unauthorized('the Authorization header must be `Bearer <token>`');
      const actor = lookup(match[1]!);
      if (actor === undefined) throw unauthorized('the token is not valid');
      return actor;
    },
    checkOrigin: (req, port) => checkBrowserOrigin(req, loopback, port),
    authenticate: lookup,
    hasToken: (actor) => table.some((entry) => sameActor(entry.actor, actor)),
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
