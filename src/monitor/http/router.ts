/**
 * Routes: a method, a path pattern with `:name` segments, and a handler. A handler returns
 * a reply (JSON or text) or takes the response over itself (a stream) and returns nothing.
 * Extra routes (GET /metrics, a board) are mounted through `createHttpServer({extraRoutes})`
 * and pass through the same authentication and error handling.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Actor } from '../../engine/index.js';
import { HttpError } from './errors.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  /** The `:name` segments of the path. */
  params: Record<string, string>;
  query: URLSearchParams;
  /** Who is calling (see auth.ts): the actor the engine's rules are decided on. */
  actor: Actor;
}

export type Reply =
  | { status?: number; json: unknown; headers?: Record<string, string> }
  | { status?: number; text: string; contentType: string; headers?: Record<string, string> }
  | { status?: number; body: Buffer; contentType: string; headers?: Record<string, string> };

export type Handler = (ctx: RouteContext) => Promise<Reply | void> | Reply | void;

export interface Route {
  method: Method;
  /** e.g. `/api/tasks/:id/cancel`. */
  path: string;
  handler: Handler;
  /**
   * Served without credentials (only the browser-origin checks apply): the board page, which
   * holds no data, and sign-in. The handler's actor is then ANONYMOUS.
   */
  public?: boolean;
}

/** The actor a public route's handler is given. */
export const ANONYMOUS: Actor = Object.freeze({ id: 'anonymous', role: 'agent' });

interface Compiled {
  route: Route;
  segments: string[];
}

export interface Router {
  /** The route for a request and its params; throws 404 or 405. */
  match(method: string, pathname: string): { route: Route; params: Record<string, string> };
}

const split = (path: string): string[] => path.split('/').filter((s) => s.length > 0);

export function createRouter(routes: Route[]): Router {
  const compiled: Compiled[] = routes.map((route) => ({ route, segments: split(route.path) }));
  for (const [i, a] of compiled.entries()) {
    if (compiled.some((b, j) => j < i && b.route.method === a.route.method && b.route.path === a.route.path)) {
      throw new Error(`route ${a.route.method} ${a.route.path} is defined twice`);
    }
  }

  const paramsOf = (c: Compiled, parts: string[]): Record<string, string> | undefined => {
    if (c.segments.length !== parts.length) return undefined;
    const params: Record<string, string> = {};
    for (const [i, seg] of c.segments.entries()) {
      const part = parts[i]!;
      if (seg.startsWith(':')) params[seg.slice(1)] = part;
      else if (seg !== part) return undefined;
    }
    return params;
  };

  return {
    match(method, pathname) {
      let parts: string[];
      try {
        parts = split(pathname).map(decodeURIComponent);
      } catch {
        throw new HttpError(404, 'NOT_FOUND', `no endpoint ${pathname}`);
      }
      // A literal segment wins over a parameter (POST /api/tasks/stop-all before /api/tasks/:id).
      const candidates = compiled
        .map((c) => ({ c, params: paramsOf(c, parts) }))
        .filter((x): x is { c: Compiled; params: Record<string, string> } => x.params !== undefined)
        .sort((x, y) => Object.keys(x.params).length - Object.keys(y.params).length);
      const hit = candidates.find((x) => x.c.route.method === method);
      if (hit !== undefined) return { route: hit.c.route, params: hit.params };
      if (candidates.length > 0) {
        const allow = [...new Set(candidates.map((x) => x.c.route.method))].join(', ');
        throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${pathname} (allowed: ${allow})`, { Allow: allow });
      }
      throw new HttpError(404, 'NOT_FOUND', `no endpoint ${pathname}`);
    },
  };
}
