/**
 * Browser sessions. A browser's EventSource cannot send an Authorization header, and a token
 * kept in page storage is readable by any script on the page. So the board signs in once:
 * POST /api/session with a token, or with a one-time sign-in code the server printed
 * (signin-codes.ts); the server answers with a random session id in an HttpOnly,
 * SameSite=Strict cookie, which same-origin fetches and the event stream then carry.
 *
 * The cookie is never sent by other sites' pages (SameSite=Strict), and auth.ts refuses
 * cross-origin requests anyway, so it opens no cross-site request forgery.
 *
 * The cookie alone is no credential. Cookies are scoped to a host, not a port: a signed-in
 * browser that opens a page another local user serves on any other loopback port sends that
 * user the cookie (same host, so same site for SameSite too), who could replay it from curl.
 * So a session also has a key, given once in the sign-in's answer, which the board keeps in
 * its origin's storage (scheme, host and port: no other port's page can read it) and sends
 * with each request (X-Taskloop-Session-Key, or `session_key=` in the URL where a browser
 * cannot set a header: the event stream, a screen image). The key is an HMAC of the session
 * id under this process's secret, so nothing more is stored. Sessions live in
 * this server process's memory: a restart signs browsers out. The cookie is not `Secure`
 * because the server speaks plain HTTP; put TLS in front of a server off the machine.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod/v4';
import type { Actor } from '../../engine/index.js';
import type { Authenticator } from './auth.js';
import type { SignInCodes } from './signin-codes.js';
import { HttpError } from './errors.js';
import { readJson } from './request.js';
import type { Route } from './router.js';

export const SESSION_COOKIE = 'taskloop_session';
/** How long a session lasts from sign-in. */
export const SESSION_MS = 12 * 60 * 60 * 1000;
/** The oldest session is dropped past this many. */
const MAX_SESSIONS = 1000;
/** One identity's oldest session gives way past this many, so no one signs anyone else out. */
export const MAX_SESSIONS_PER_ACTOR = 16;

export interface Sessions {
  /** A new session for `actor`; returns its id. */
  open(actor: Actor): string;
  /** The actor of a live session, or undefined. */
  actorOf(id: string): Actor | undefined;
  /** The session's key (given to the browser at sign-in). */
  keyOf(id: string): string;
  /** The actor of a live session whose key is `key` (compared in constant time), or undefined. */
  verify(id: string, key: string): Actor | undefined;
  close(id: string): void;
}

export function createSessions(now: () => number = Date.now): Sessions {
  const live = new Map<string, { actor: Actor; expiresAt: number }>();
  const secret = randomBytes(32);
  const keyOf = (id: string): string => createHmac('sha256', secret).update(id).digest('base64url');
  const actorOf = (id: string): Actor | undefined => {
    const s = live.get(id);
    if (s === undefined) return undefined;
    if (s.expiresAt <= now()) {
      live.delete(id);
      return undefined;
    }
    return s.actor;
  };
  return {
    keyOf,
    verify(id, key) {
      const want = Buffer.from(keyOf(id));
      const got = Buffer.from(key);
      return got.length === want.length && timingSafeEqual(got, want) ? actorOf(id) : undefined;
    },
    open(actor) {
      const id = randomBytes(32).toString('base64url');
      const own = [...live].filter(([, s]) => s.actor.id === actor.id && s.actor.role === actor.role);
      if (own.length >= MAX_SESSIONS_PER_ACTOR) live.delete(own[0]![0]);
      live.set(id, { actor, expiresAt: now() + SESSION_MS });
      // A Map iterates in insertion order: the first key is the oldest session.
      if (live.size > MAX_SESSIONS) live.delete(live.keys().next().value!);
      return id;
    },
    actorOf,
    close: (id) => void live.delete(id),
  };
}

/** The value of one cookie of a request, or undefined. */
export function cookieOf(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The header, or the URL parameter where a browser cannot set one, that carries a session's key. */
export const SESSION_KEY_HEADER = 'x-taskloop-session-key';
export const SESSION_KEY_PARAM = 'session_key';

/** The session key a request presents, or undefined. */
export function sessionKeyOf(req: IncomingMessage): string | undefined {
  const header = req.headers[SESSION_KEY_HEADER];
  if (typeof header === 'string') return header;
  // In the URL only where a browser cannot set a header (an EventSource, an image): a GET.
  if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
  return new URL(req.url ?? '/', 'http://localhost').searchParams.get(SESSION_KEY_PARAM) ?? undefined;
}

const signIn = z
  .strictObject({ token: z.string().min(1).max(4096).optional(), code: z.string().min(1).max(200).optional() })
  .refine((b) => (b.token === undefined) !== (b.code === undefined), 'give either token or code (a one-time sign-in code), not both');
const cookie = (value: string, maxAgeS: number) => `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeS}`;
const who = (actor: Actor) => ({ id: actor.id, role: actor.role });

/**
 * POST /api/session `{token}` or `{code}` signs in (public: it is how credentials arrive), GET
 * tells who the caller is, DELETE signs out.
 */
export function sessionRoutes(auth: Authenticator, sessions: Sessions, codes: SignInCodes): Route[] {
  return [
    {
      method: 'POST',
      path: '/api/session',
      public: true,
      handler: async ({ req }) => {
        const body = await readJson(req, signIn, 'sign-in');
        const actor = body.token !== undefined ? auth.authenticate(body.token) : codes.redeem(body.code!);
        if (actor === undefined) {
          throw new HttpError(401, 'UNAUTHORIZED', body.token !== undefined ? 'the token is not valid' : 'the sign-in code is not valid: it was used, has expired, or was never issued');
        }
        const id = sessions.open(actor);
        return { json: { actor: who(actor), expires_in_s: SESSION_MS / 1000, session_key: sessions.keyOf(id) }, headers: { 'Set-Cookie': cookie(id, SESSION_MS / 1000) } };
      },
    },
    {
      method: 'GET',
      path: '/api/session',
      handler: ({ actor }) => ({ json: { actor: who(actor) } }),
    },
    {
      method: 'DELETE',
      path: '/api/session',
      public: true,
      handler: ({ req }) => {
        const id = cookieOf(req, SESSION_COOKIE);
        if (id !== undefined) sessions.close(id);
        return { status: 200, json: { signed_out: id !== undefined }, headers: { 'Set-Cookie': cookie('', 0) } };
      },
    },
  ];
}
