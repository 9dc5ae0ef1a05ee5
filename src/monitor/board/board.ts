/**
 * The live web board (issue 5 §2, issue 14): one HTML page served by the HTTP server itself
 * at GET / and GET /board, built at start-up from the files in `web/board/` — the HTML, the
 * CSS and the browser scripts, plain JavaScript that `tsc` checks (`// @ts-check`, JSDoc,
 * web/board/tsconfig.json with the DOM library; `npm run typecheck`). No bundler: the
 * scripts are joined in SCRIPTS order into one inline script, in one function scope.
 *
 * The page reads the REST API the server already has — GET /api/tasks, /api/tasks/:id,
 * /api/runs/:id, /api/approvals, /metrics — and stays live over
 * `EventSource('/api/events?after=<last_event_id>')`, fetching only what an event says
 * changed. Its fetches are same-origin, so they pass the server's browser-origin checks
 * (auth.ts); a page on another site still cannot call the API. All task text is put into
 * the DOM as text, never as HTML, and the Content-Security-Policy allows only this page's
 * own script and style, by the hashes computed here from the files, so even a slip in
 * escaping could not run injected script.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Route } from '../http/router.js';

/** `web/board/` of the package: the same three levels up from src/monitor/board and dist/monitor/board. */
const WEB = new URL('../../../web/board/', import.meta.url);
/** The browser scripts, in the order they run (main.js starts the board). */
export const SCRIPTS = ['dom.js', 'signin.js', 'columns.js', 'live.js', 'approvals.js', 'detail.js', 'main.js'] as const;
const STYLE_SLOT = '<style>/* BOARD_STYLE */</style>';
const SCRIPT_SLOT = '<script>/* BOARD_SCRIPT */</script>';

export interface BoardPage {
  html: string;
  csp: string;
}

const hash = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

function read(name: string): string {
  try {
    return readFileSync(new URL(name, WEB), 'utf8');
  } catch (err) {
    throw new Error(`the board's ${name} is missing from ${WEB.pathname} (the package ships web/): ${(err as Error).message}`);
  }
}

/** Reads web/board/ and builds the page and its CSP. */
export function buildBoardPage(): BoardPage {
  const style = read('board.css');
  // `</script` inside a script would end the inline element early; the sources never need it.
  const script = `'use strict';\n(function () {\n${SCRIPTS.map((name) => `// ---- ${name}\n${read(name)}`).join('\n')}\n})();\n`;
  if (/<\/script/i.test(script) || /<\/style/i.test(style)) throw new Error('the board\'s sources must not contain </script or </style');
  const template = read('board.html');
  if (!template.includes(STYLE_SLOT) || !template.includes(SCRIPT_SLOT)) throw new Error(`web/board/board.html lacks ${STYLE_SLOT} or ${SCRIPT_SLOT}`);
  const html = template.replace(STYLE_SLOT, () => `<style>${style}</style>`).replace(SCRIPT_SLOT, () => `<script>${script}</script>`);
  // Only this page's own inline script and style; fetches and the event stream to this server; no framing (clickjacking).
  const csp = [
    "default-src 'none'",
    `script-src ${hash(script)}`,
    `style-src ${hash(style)}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, csp };
}

let page: BoardPage | undefined;

/**
 * GET / and GET /board: the board page. Mount with `createHttpServer({extraRoutes: boardRoutes()})`.
 * The page is built once per process, at the first call (a server's start-up).
 */
export function boardRoutes(): Route[] {
  page ??= buildBoardPage();
  const { html, csp } = page;
  const headers = { 'Content-Security-Policy': csp, 'X-Frame-Options': 'DENY', 'Referrer-Policy': 'no-referrer' };
  const handler = () => ({ text: html, contentType: 'text/html; charset=utf-8', headers });
  // Public: the page holds no data. It signs in with the one-time code of a `?signin=` link, or
  // asks for a token (session.ts), and every call it makes is authenticated as usual.
  return [
    { method: 'GET', path: '/', handler, public: true },
    { method: 'GET', path: '/board', handler, public: true },
  ];
}
