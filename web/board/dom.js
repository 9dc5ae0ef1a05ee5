// @ts-check
/*
 * The board's helpers: elements, times, the toast and the API client. Every script of the
 * board is a plain script in one scope (board.ts joins them into one inline, hashed script).
 * Data goes into the DOM only as text (`h` sets textContent and attributes), never as HTML:
 * titles, goals, args and errors come from users and agents.
 */

const STATES = ['pending', 'claimed', 'in_progress', 'waiting', 'review', 'completed', 'failed', 'cancelled'];
/** @type {Record<string, boolean>} */
const STOPPABLE = { claimed: true, in_progress: true, waiting: true };
/** @type {Record<string, boolean>} */
const TERMINAL = { completed: true, failed: true, cancelled: true };

/** @param {string} id */
function byId(id) {
  const el = document.getElementById(id);
  if (el === null) throw new Error(`the board page has no #${id}`);
  return el;
}


/**
 * Builds an element; strings among the children become text nodes, never markup.
 * @param {string} tag
 * @param {Record<string, unknown> | null} [props]
 * @param {...Child} children
 * @returns {HTMLElement}
 */
function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = String(v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), /** @type {EventListener} */ (v));
    else if (k === 'disabled' && el instanceof HTMLButtonElement) el.disabled = true;
    else el.setAttribute(k, String(v));
  }
  for (const c of children) add(el, c);
  return el;
}

/** @param {HTMLElement} el @param {Child} child */
function add(el, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) {
    for (const c of child) add(el, c);
    return;
  }
  el.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
}

/** @param {HTMLElement} el */
function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
}

/** "5s ago", "in 3m". @param {string | null | undefined} iso */
function ago(iso) {
  if (!iso) return '';
  let s = Math.round((Date.now() - Date.parse(iso)) / 1000);
  const future = s < 0;
  s = Math.abs(s);
  const t = s < 60 ? `${s}s` : s < 3600 ? `${Math.round(s / 60)}m` : s < 86400 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86400)}d`;
  return future ? `in ${t}` : `${t} ago`;
}

/** JSON or text, cut at `max` characters. @param {unknown} value @param {number} [max] */
function show(value, max) {
  let text = typeof value === 'string' ? value : JSON.stringify(value, null, 1);
  if (text === undefined) text = String(value);
  return max && text.length > max ? `${text.slice(0, max)}…` : text;
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let toastTimer;
/** @param {string} message @param {'error' | 'info'} [kind] */
function toast(message, kind = 'error') {
  // While the sign-in form is up, failing calls are expected: it says what to do.
  if (!byId('signin').hidden && kind !== 'info') return;
  const el = byId('toast');
  el.textContent = message;
  el.setAttribute('data-kind', kind);
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 6000);
}

/** An API refusal: its HTTP status and the server's `code: message`. */
class ApiError extends Error {
  /** @param {string} message @param {number} status */
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/** The status of a failed call, when the server answered. @param {unknown} err */
const statusOf = (err) => (err instanceof ApiError ? err.status : 0);
/** @param {unknown} err */
const messageOf = (err) => (err instanceof Error ? err.message : String(err));

/**
 * The session's key, from its sign-in (src/monitor/http/session.ts): kept in this origin's
 * storage, which no page on another port can read, and sent beside the session cookie, which
 * a browser also sends to other ports of this host.
 */
const SESSION_KEY = 'taskloop_session_key';
/** @returns {string} */
function sessionKey() {
  return window.localStorage.getItem(SESSION_KEY) ?? '';
}
/** @param {string | null} key */
function keepSessionKey(key) {
  if (key) window.localStorage.setItem(SESSION_KEY, key);
  else window.localStorage.removeItem(SESSION_KEY);
}
/** @returns {Record<string, string>} */
function keyHeader() {
  const key = sessionKey();
  return key ? { 'x-taskloop-session-key': key } : {};
}
/** `url` with the session's key, for what cannot carry a header (an EventSource, an image). @param {string} url */
function withKey(url) {
  return `${url}${url.includes('?') ? '&' : '?'}session_key=${encodeURIComponent(sessionKey())}`;
}

/**
 * A same-origin JSON call with the session cookie. A 401 (outside signing in) brings up the sign-in form.
 * @template T
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<T>}
 */
async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json', ...keyHeader() };
  /** @type {RequestInit} */
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  /** @type {any} */
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) {
    const err = new ApiError(json && json.error ? `${json.error.code}: ${json.error.message}` : `${method} ${path}: HTTP ${res.status}`, res.status);
    if (res.status === 401 && !(method === 'POST' && path === '/api/session')) askToken();
    throw err;
  }
  return json;
}
