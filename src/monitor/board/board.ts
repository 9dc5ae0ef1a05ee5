/**
 * The live web board (issue 5 §2): one self-contained HTML page (inline CSS, plain browser
 * JavaScript, no build step) served by the HTTP server itself at GET / and GET /board.
 *
 * The page reads the REST API the server already has — GET /api/tasks, /api/tasks/:id,
 * /api/runs/:id, /api/approvals, /metrics — and stays live over
 * `EventSource('/api/events?after=<last_event_id>')`. Its fetches are same-origin, so they
 * pass the server's browser-origin checks (auth.ts); a page on another site still cannot
 * call the API. All task text is put into the DOM as text (textContent), never as HTML,
 * and the Content-Security-Policy allows only this page's own script (by hash), so even a
 * slip in escaping could not run injected script.
 */
import { createHash } from 'node:crypto';
import type { Route } from '../http/router.js';
import { BOARD_HTML, BOARD_SCRIPT, BOARD_STYLE } from './page.js';

const hash = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/** Only this page's own inline script and style; fetches and the event stream to this server; no framing (clickjacking). */
export const BOARD_CSP = [
  "default-src 'none'",
  `script-src ${hash(BOARD_SCRIPT)}`,
  `style-src ${hash(BOARD_STYLE)}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const BOARD_HEADERS = {
  'Content-Security-Policy': BOARD_CSP,
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

/** GET / and GET /board: the board page. Mount with `createHttpServer({extraRoutes: boardRoutes()})`. */
export function boardRoutes(): Route[] {
  const handler = () => ({ text: BOARD_HTML, contentType: 'text/html; charset=utf-8', headers: BOARD_HEADERS });
  // Public: the page holds no data. It signs in with the one-time code of a `?signin=` link, or
  // asks for a token (session.ts), and every call it makes is authenticated as usual.
  return [
    { method: 'GET', path: '/', handler, public: true },
    { method: 'GET', path: '/board', handler, public: true },
  ];
}
