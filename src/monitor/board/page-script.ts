/** The board page's script: data, the live stream, columns and approvals; the detail pane is in page-detail.ts. */
/*
 * Rules for the script (it sits in String.raw template literals): no backticks and no
 * dollar-brace sequences; put data into the DOM only through textContent / setAttribute
 * (the helper `h`), never innerHTML — titles, goals, args and errors come from users and agents.
 */
import { DETAIL_SCRIPT } from './page-detail.js';

const HEAD = String.raw`
'use strict';
(function () {
  var STATES = ['pending', 'claimed', 'in_progress', 'waiting', 'review', 'completed', 'failed', 'cancelled'];
  var STOPPABLE = { claimed: true, in_progress: true, waiting: true };
  var TERMINAL = { completed: true, failed: true, cancelled: true };
  var PAGE = 1000;
  var MAX_CARDS = 300;

  var tasks = new Map();
  var approvals = [];
  var selected = null;
  var selectedRun = null;
  var lastEventId = 0;
  var source = null;
  var dirtyTasks = new Set();
  var approvalsDirty = false;
  var flushTimer = null;
  var renderQueued = false;
  var detailSeq = 0;

  function byId(id) { return document.getElementById(id); }

  // Builds an element; strings among the children become text nodes, never markup.
  function h(tag, props) {
    var el = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (k) {
        var v = props[k];
        if (v === undefined || v === null || v === false) return;
        if (k === 'class') el.className = v;
        else if (k === 'text') el.textContent = String(v);
        else if (k.slice(0, 2) === 'on') el.addEventListener(k.slice(2), v);
        else if (k === 'disabled') el.disabled = true;
        else el.setAttribute(k, String(v));
      });
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, child) {
    if (child === undefined || child === null || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(el, c); }); return; }
    el.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }

  function ago(iso) {
    if (!iso) return '';
    var s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    var future = s < 0; s = Math.abs(s);
    var t = s < 60 ? s + 's' : s < 3600 ? Math.round(s / 60) + 'm' : s < 86400 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd';
    return future ? 'in ' + t : t + ' ago';
  }
  function show(value, max) {
    var text = typeof value === 'string' ? value : JSON.stringify(value, null, 1);
    if (text === undefined) text = String(value);
    return max && text.length > max ? text.slice(0, max) + '…' : text;
  }

  var toastTimer = null;
  function toast(message, kind) {
    // While the sign-in form is up, failing calls are expected: it says what to do.
    if (!byId('signin').hidden && kind !== 'info') return;
    var el = byId('toast');
    el.textContent = message;
    el.setAttribute('data-kind', kind || 'error');
    el.hidden = false;
    clearTimeout(toastTimer);
    toastTimer = setTimeout(function () { el.hidden = true; }, 6000);
  }

  async function api(method, path, body) {
    var init = { method: method, headers: { accept: 'application/json' }, cache: 'no-store', credentials: 'same-origin' };
    if (body !== undefined) { init.headers['content-type'] = 'application/json'; init.body = JSON.stringify(body); }
    var res = await fetch(path, init);
    var text = await res.text();
    var json = null;
    try { json = text ? JSON.parse(text) : null; } catch (e) { json = null; }
    if (!res.ok) {
      var err = new Error(json && json.error ? json.error.code + ': ' + json.error.message : method + ' ' + path + ': HTTP ' + res.status);
      err.status = res.status;
      if (res.status === 401 && !(method === 'POST' && path === '/api/session')) askToken();
      throw err;
    }
    return json;
  }

  // ---- signing in (every server requires a credential; see src/monitor/http/session.ts) -------

  function askToken(message) {
    if (source) { source.close(); source = null; }
    setConn('closed', 'signed out');
    byId('who').textContent = '';
    byId('sign-out').hidden = true;
    var box = byId('signin');
    var wasHidden = box.hidden;
    box.hidden = false;
    var err = byId('signin-error');
    err.hidden = !message;
    err.textContent = message || '';
    if (wasHidden) byId('signin-token').focus();
  }

  byId('signin-form').addEventListener('submit', async function (e) {
    e.preventDefault();
    var input = byId('signin-token');
    try {
      await api('POST', '/api/session', { token: input.value });
      input.value = '';
      byId('signin').hidden = true;
      start();
    } catch (err) {
      askToken(err.status === 401 ? 'That token is not valid.' : err.message);
    }
  });

  // A one-time sign-in link (?signin=CODE, printed by the server): the code leaves the address
  // bar and the history before anything else happens, then is traded for a session cookie.
  async function signInFromLink() {
    var params = new URLSearchParams(window.location.search);
    var code = params.get('signin');
    if (code === null) return;
    params.delete('signin');
    var rest = params.toString();
    window.history.replaceState(null, '', window.location.pathname + (rest ? '?' + rest : '') + window.location.hash);
    try {
      await api('POST', '/api/session', { code: code });
    } catch (err) {
      askToken(err.status === 401 ? 'That sign-in link was used already or has expired. Paste a token instead.' : err.message);
    }
  }

  byId('sign-out').addEventListener('click', async function () {
    try { await api('DELETE', '/api/session'); } catch (e) { /* signed out either way */ }
    askToken();
  });

  function slim(task) {
    var t = Object.assign({}, task);
    delete t.events; delete t.runs; delete t.card; delete t.result;
    t.goal = task.card && typeof task.card.goal === 'string' ? task.card.goal : null;
    return t;
  }

  // ---- the board ----------------------------------------------------------------------

  async function loadTasks() {
    var all = [];
    var after = 0;
    for (var page = 0; page < 50; page++) {
      var r = await api('GET', '/api/tasks?limit=' + PAGE + (after ? '&after=' + after : ''));
      // The cursor of the first page: events after it cover every change since that read.
      if (page === 0) lastEventId = r.last_event_id;
      all = all.concat(r.tasks);
      if (r.tasks.length < PAGE) break;
      after = r.tasks[r.tasks.length - 1].id;
    }
    tasks.clear();
    all.forEach(function (t) { tasks.set(t.id, slim(t)); });
    queueRender();
  }

  function queueRender() {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(function () { renderQueued = false; renderBoard(); });
  }

  function sortFor(state) {
    if (TERMINAL[state]) return function (a, b) { return (b.updated_at || '').localeCompare(a.updated_at || '') || b.id - a.id; };
    return function (a, b) { return b.priority - a.priority || a.id - b.id; };
  }

  function renderBoard() {
    var groups = {};
    STATES.forEach(function (s) { groups[s] = []; });
    tasks.forEach(function (t) { (groups[t.state] || (groups[t.state] = [])).push(t); });
    var board = byId('board');
    var scroll = {};
    board.querySelectorAll('.cards').forEach(function (c) { scroll[c.parentNode.getAttribute('data-column')] = c.scrollTop; });
    clear(board);
    var summary = [];
    STATES.forEach(function (state) {
      var list = groups[state].sort(sortFor(state));
      if (list.length > 0) summary.push(list.length + ' ' + state.replace('_', ' '));
      var cards = h('div', { class: 'cards' },
        list.slice(0, MAX_CARDS).map(card),
        list.length > MAX_CARDS ? h('div', { class: 'more', text: '+' + (list.length - MAX_CARDS) + ' more' }) : null);
      board.appendChild(h('section', { class: 'column', 'data-column': state, 'data-state': state },
        h('h2', null, h('span', { text: state.replace('_', ' ') }), h('span', { class: 'count', 'data-count': state, text: list.length })),
        cards));
      cards.scrollTop = scroll[state] || 0;
    });
    byId('summary').textContent = tasks.size + ' tasks' + (summary.length ? ': ' + summary.join(', ') : '');
  }

  function card(t) {
    var meta = [];
    if (t.assignee) meta.push(t.assignee);
    else if (t.queue && t.queue !== 'default') meta.push('queue ' + t.queue);
    if (t.priority) meta.push('p' + t.priority);
    if (t.attempts > 1) meta.push('attempt ' + t.attempts);
    meta.push(ago(t.updated_at));
    return h('div', {
      class: 'card' + (t.id === selected ? ' selected' : ''), 'data-task-id': t.id, 'data-state': t.state, tabindex: 0, role: 'button',
      onclick: function () { select(t.id); },
      onkeydown: function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); select(t.id); } },
    },
      h('div', { class: 'id', text: '#' + t.id }),
      h('div', { class: 'title', text: t.title }),
      h('div', { class: 'meta', text: meta.join(' · ') }));
  }

  // ---- live updates ----------------------------------------------------------------------

  function setConn(state, text) {
    var el = byId('conn');
    el.setAttribute('data-conn', state);
    el.textContent = text || state;
  }

  function connect() {
    if (source) source.close();
    source = new EventSource('/api/events?after=' + encodeURIComponent(lastEventId));
    source.onopen = function () { setConn('live'); };
    source.onmessage = function (m) {
      var ev;
      try { ev = JSON.parse(m.data); } catch (e) { return; }
      if (m.lastEventId) lastEventId = Number(m.lastEventId);
      onEvent(ev);
    };
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) {
        // The server refused the stream (or is gone for good): start over in a moment.
        setConn('closed', 'disconnected');
        source.close();
        setTimeout(start, 3000);
      } else {
        setConn('reconnecting', 'reconnecting…');
      }
    };
  }

  function onEvent(ev) {
    if (ev.task_id !== null && ev.task_id !== undefined) dirtyTasks.add(ev.task_id);
    var type = String(ev.type || '');
    if (type.indexOf('approval.') === 0 || type === 'task.transitioned' || type === 'run.finished') approvalsDirty = true;
    if (type === 'run.finished' || type === 'run.step_finished') breakersDirty = true;
    if (!flushTimer) flushTimer = setTimeout(flush, 120);
  }

  async function flush() {
    flushTimer = null;
    var ids = Array.from(dirtyTasks);
    dirtyTasks.clear();
    var refreshDetailToo = false;
    await Promise.all(ids.map(async function (id) {
      try {
        var full = await api('GET', '/api/tasks/' + id);
        tasks.set(id, slim(full));
      } catch (e) {
        if (e.status === 404) tasks.delete(id);
      }
      if (id === selected) refreshDetailToo = true;
    }));
    queueRender();
    if (refreshDetailToo) refreshDetail();
    if (approvalsDirty) { approvalsDirty = false; loadApprovals(); }
    if (breakersDirty) { breakersDirty = false; loadBreakers(); }
  }

  // ---- approvals ----------------------------------------------------------------------

  async function loadApprovals() {
    try {
      var r = await api('GET', '/api/approvals');
      approvals = r.approvals;
      renderApprovals();
    } catch (e) { toast('approvals: ' + e.message); }
  }

  function renderApprovals() {
    var box = byId('approvals');
    clear(box);
    var count = byId('approvals-count');
    count.textContent = approvals.length;
    count.setAttribute('data-n', approvals.length);
    if (approvals.length === 0) { box.appendChild(h('p', { class: 'muted', text: 'Nothing waiting for a decision.' })); return; }
    approvals.forEach(function (a) {
      var task = tasks.get(a.task_id);
      var decide = function (what, button) {
        return async function () {
          button.parentNode.querySelectorAll('button').forEach(function (b) { b.disabled = true; });
          try {
            await api('POST', '/api/approvals/' + a.id + '/' + what, {});
            toast('approval #' + a.id + ' ' + (what === 'approve' ? 'approved' : 'rejected'), 'info');
          } catch (e) { toast(what + ' #' + a.id + ': ' + e.message); }
          loadApprovals();
        };
      };
      var approve = h('button', { class: 'ok', type: 'button', 'data-action': 'approve', text: 'Approve' });
      var reject = h('button', { class: 'danger', type: 'button', 'data-action': 'reject', text: 'Reject' });
      approve.addEventListener('click', decide('approve', approve));
      reject.addEventListener('click', decide('reject', reject));
      box.appendChild(h('div', { class: 'approval', 'data-approval-id': a.id, 'data-task-id': a.task_id },
        h('div', null, h('span', { class: 'tool', text: a.tool }), ' for ',
          h('a', { href: '#', text: 'task #' + a.task_id, onclick: function (e) { e.preventDefault(); select(a.task_id); } })),
        task ? h('div', { class: 'muted', text: task.title }) : null,
        h('pre', { text: show(a.args, 600) }),
        h('div', { class: 'muted', text: 'approval #' + a.id + (a.expires_at ? ' · expires ' + ago(a.expires_at) : '') }),
        h('div', { class: 'actions' }, approve, reject)));
    });
  }

  // ---- breakers (from GET /metrics, when the server has it) ----------------------------------

  var breakersDirty = false;
  async function loadBreakers() {
    var el = byId('breakers');
    try {
      var res = await fetch('/metrics', { cache: 'no-store' });
      if (!res.ok) { el.hidden = true; return; }
      var open = [];
      var seen = 0;
      (await res.text()).split('\n').forEach(function (line) {
        if (line.indexOf('taskloop_breaker_open{') !== 0) return;
        seen++;
        var labels = {};
        line.replace(/(\w+)="((?:[^"\\]|\\.)*)"/g, function (_, k, v) { labels[k] = v; return ''; });
        if (Number(line.trim().split(' ').pop()) > 0) open.push(labels.tool + ' (' + labels.state + ')');
      });
      el.hidden = false;
      el.setAttribute('data-open', open.length > 0 ? 'true' : 'false');
      el.textContent = open.length > 0 ? 'breaker open: ' + open.join(', ') : 'breakers closed' + (seen ? '' : '');
    } catch (e) { el.hidden = true; }
  }

  // ---- the task detail -----------------------------------------------------------------

`;

const TAIL = String.raw`
  async function start() {
    if (!byId('signin').hidden) return;
    setConn('connecting', 'connecting…');
    try {
      var me = await api('GET', '/api/session');
      byId('who').textContent = me.actor.id + ' (' + me.actor.role + ')';
      byId('sign-out').hidden = false;
      await loadTasks();
      connect();
      await loadApprovals();
      loadBreakers();
      if (selected !== null) refreshDetail();
    } catch (e) {
      if (e.status === 401) return; // the sign-in form is up; it starts the board again
      setConn('closed', 'disconnected');
      toast('cannot load the board: ' + e.message);
      setTimeout(start, 3000);
    }
  }

  byId('stop-all').addEventListener('click', function (e) {
    if (!window.confirm('Stop every running task?')) return;
    control('/api/tasks/stop-all', 'stop all')(e);
  });
  // Approvals expire and relative times age without events: a slow refresh keeps them honest.
  setInterval(function () { loadApprovals(); loadBreakers(); queueRender(); }, 15000);
  signInFromLink().then(start);
})();
`;

/** One IIFE: the head opens it, the tail closes it. */
export const BOARD_SCRIPT = HEAD + DETAIL_SCRIPT + TAIL;
