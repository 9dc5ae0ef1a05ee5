/**
 * The board page's source: HTML, inline CSS and plain browser JavaScript (no framework, no
 * bundler). Kept as string constants so `tsc` carries it into dist/ with nothing to copy.
 *
 * Rules for the script below (it sits in String.raw template literals): no backticks and
 * no dollar-brace sequences; put data into the DOM only through textContent / setAttribute
 * (the helper `h`), never innerHTML — titles, goals, args and errors come from users and agents.
 */

export const BOARD_STYLE = String.raw`
:root {
  --bg: #0f1217; --panel: #171b22; --card: #1e232c; --card-hover: #252b36; --line: #2a303b;
  --text: #e6e9ef; --muted: #8b93a3; --accent: #5aa9ff; --danger: #e5484d; --ok: #3fb950; --warn: #d29922;
  font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color-scheme: dark;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--text); height: 100vh; display: flex; flex-direction: column; }
header { display: flex; align-items: center; gap: 14px; padding: 8px 14px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { font-size: 16px; margin: 0; letter-spacing: .02em; }
.spacer { flex: 1; }
.muted { color: var(--muted); }
.conn::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 6px; background: var(--warn); vertical-align: middle; }
.conn[data-conn="live"]::before { background: var(--ok); }
.conn[data-conn="closed"]::before { background: var(--danger); }
.breakers { padding: 2px 8px; border-radius: 10px; border: 1px solid var(--line); }
.breakers[data-open="true"] { border-color: var(--danger); color: #ffb4b6; }
button { font: inherit; color: var(--text); background: #2a3140; border: 1px solid #3a4354; border-radius: 5px; padding: 3px 10px; cursor: pointer; }
button:hover:not(:disabled) { background: #343d4f; }
button:disabled { opacity: .5; cursor: default; }
button.danger { background: #4a1d21; border-color: #7a2a30; }
button.danger:hover:not(:disabled) { background: #62252b; }
button.ok { background: #17391f; border-color: #2a6b38; }
button.ok:hover:not(:disabled) { background: #1f4d2a; }
main { flex: 1; display: grid; grid-template-columns: minmax(0, 1fr) 380px; min-height: 0; }
.board { display: grid; grid-template-columns: repeat(8, minmax(128px, 1fr)); gap: 8px; padding: 10px; overflow: auto; }
.column { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; display: flex; flex-direction: column; min-height: 0; }
.column h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; margin: 0; padding: 8px 10px; border-bottom: 1px solid var(--line); display: flex; justify-content: space-between; border-top: 3px solid var(--state, var(--muted)); border-radius: 8px 8px 0 0; }
.column h2 { align-items: center; gap: 4px; }
.column h2 > span:first-child { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.column h2 .count { flex: none; }
.column .cards { padding: 6px; display: flex; flex-direction: column; gap: 6px; overflow-y: auto; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 3px solid var(--state, var(--muted)); border-radius: 6px; padding: 6px 8px; cursor: pointer; overflow-wrap: anywhere; }
.card:hover, .card:focus { background: var(--card-hover); outline: none; }
.card.selected { border-color: var(--accent); box-shadow: 0 0 0 1px var(--accent); }
.card .id { color: var(--muted); font-size: 11px; }
.card .title { margin: 2px 0; }
.card .meta { color: var(--muted); font-size: 11px; }
.more { color: var(--muted); font-size: 11px; text-align: center; padding: 4px; }
[data-state="pending"] { --state: #8b93a3; } [data-state="claimed"] { --state: #7aa2f7; } [data-state="in_progress"] { --state: #5aa9ff; }
[data-state="waiting"] { --state: #d29922; } [data-state="review"] { --state: #bc8cff; } [data-state="completed"] { --state: #3fb950; }
[data-state="failed"] { --state: #e5484d; } [data-state="cancelled"] { --state: #6e7681; }
aside { border-left: 1px solid var(--line); background: var(--panel); overflow-y: auto; }
.panel { padding: 10px 12px; border-bottom: 1px solid var(--line); }
.panel h2 { font-size: 13px; margin: 0 0 8px; display: flex; align-items: center; gap: 8px; }
.count { background: #2a3140; border-radius: 10px; padding: 0 7px; font-size: 11px; }
.count[data-n]:not([data-n="0"]) { background: var(--warn); color: #111; }
.approval { background: var(--card); border: 1px solid #5a4a1a; border-radius: 6px; padding: 8px; margin-bottom: 8px; overflow-wrap: anywhere; }
.approval .tool { font-weight: 600; }
.approval .actions, .detail-actions { display: flex; gap: 6px; margin-top: 6px; }
pre { background: #0b0e13; border: 1px solid var(--line); border-radius: 4px; padding: 6px; margin: 4px 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 220px; overflow: auto; font-size: 11px; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 11px; background: var(--state, #2a3140); color: #0b0e13; font-weight: 600; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
h3 { font-size: 12px; margin: 12px 0 4px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
.detail-title { font-size: 14px; font-weight: 600; overflow-wrap: anywhere; }
table.budget { width: 100%; border-collapse: collapse; font-size: 12px; }
table.budget td { padding: 2px 4px; border-bottom: 1px solid var(--line); }
.bar { height: 5px; background: #2a3140; border-radius: 3px; overflow: hidden; min-width: 60px; }
.bar > div { height: 100%; background: var(--accent); }
.bar > div.high { background: var(--danger); }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline li { border-left: 2px solid var(--line); padding: 2px 0 6px 10px; position: relative; overflow-wrap: anywhere; }
ol.timeline li::before { content: ""; position: absolute; left: -5px; top: 7px; width: 8px; height: 8px; border-radius: 50%; background: var(--muted); }
ol.timeline li[data-status="ok"]::before, ol.timeline li[data-status="succeeded"]::before { background: var(--ok); }
ol.timeline li[data-status="failed"]::before, ol.timeline li[data-status="error"]::before, ol.timeline li[data-status="rejected"]::before { background: var(--danger); }
ol.timeline li[data-status="pending"]::before, ol.timeline li[data-status="started"]::before, ol.timeline li[data-status="waiting_approval"]::before { background: var(--warn); }
.step-head { display: flex; gap: 6px; flex-wrap: wrap; align-items: baseline; }
.step-kind { color: var(--muted); font-size: 11px; }
.step-tool { font-weight: 600; }
.step-error { color: #ffb4b6; font-size: 12px; }
.run-tabs { display: flex; gap: 4px; flex-wrap: wrap; }
.run-tabs button[aria-pressed="true"] { border-color: var(--accent); }
#toast { position: fixed; bottom: 14px; left: 50%; transform: translateX(-50%); background: #4a1d21; border: 1px solid #7a2a30; padding: 8px 14px; border-radius: 6px; max-width: 70vw; overflow-wrap: anywhere; }
#toast[data-kind="info"] { background: #17391f; border-color: #2a6b38; }
`;

export const BOARD_SCRIPT = String.raw`
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
      throw err;
    }
    return json;
  }

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

  function select(id) {
    selected = id;
    selectedRun = null;
    queueRender();
    refreshDetail();
  }

  async function refreshDetail() {
    if (selected === null) return;
    var seq = ++detailSeq;
    var id = selected;
    try {
      var task = await api('GET', '/api/tasks/' + id);
      var runs = (task.runs || []).slice().sort(function (a, b) { return a.id - b.id; });
      var chosen = runs.find(function (r) { return r.id === selectedRun; }) || runs[runs.length - 1];
      var run = chosen ? await api('GET', '/api/runs/' + chosen.id) : null;
      if (seq !== detailSeq) return;
      renderDetail(task, runs, run);
    } catch (e) {
      if (seq !== detailSeq) return;
      var box = byId('detail');
      clear(box);
      box.appendChild(h('p', { class: 'muted', text: 'task #' + id + ': ' + e.message }));
    }
  }

  function control(path, label) {
    return async function (e) {
      e.target.disabled = true;
      try {
        var r = await api('POST', path, {});
        toast(label + ': ' + (r.tasks && r.tasks.length ? 'task ' + r.tasks.join(', ') : 'nothing running'), 'info');
      } catch (err) { toast(label + ': ' + err.message); }
      e.target.disabled = false;
    };
  }

  function renderDetail(task, runs, run) {
    var box = byId('detail');
    clear(box);
    box.appendChild(h('div', { class: 'detail-title', 'data-detail-task': task.id, text: '#' + task.id + ' ' + task.title }));
    box.appendChild(h('div', null, h('span', { class: 'badge', 'data-state': task.state, 'data-detail-state': task.state, text: task.state })));
    var actions = h('div', { class: 'detail-actions' });
    if (STOPPABLE[task.state]) actions.appendChild(h('button', { class: 'danger', type: 'button', 'data-action': 'stop', text: 'Stop', onclick: control('/api/tasks/' + task.id + '/stop', 'stop #' + task.id) }));
    actions.appendChild(h('button', { type: 'button', text: 'Close', onclick: function () { selected = null; clear(box); box.appendChild(h('p', { class: 'muted', text: 'Click a task to see its run.' })); queueRender(); } }));
    box.appendChild(actions);

    var goal = task.card && typeof task.card.goal === 'string' ? task.card.goal : null;
    box.appendChild(h('dl', { class: 'meta' },
      goal ? [h('dt', { text: 'goal' }), h('dd', { text: goal })] : null,
      h('dt', { text: 'creator' }), h('dd', { text: task.creator }),
      h('dt', { text: 'assignee' }), h('dd', { text: task.assignee || '—' }),
      h('dt', { text: 'queue' }), h('dd', { text: task.queue }),
      h('dt', { text: 'priority' }), h('dd', { text: task.priority }),
      h('dt', { text: 'attempts' }), h('dd', { text: task.attempts + ' of ' + task.max_attempts }),
      h('dt', { text: 'created' }), h('dd', { text: ago(task.created_at) }),
      h('dt', { text: 'updated' }), h('dd', { text: ago(task.updated_at) }),
      task.lease_expires_at ? [h('dt', { text: 'lease' }), h('dd', { text: 'expires ' + ago(task.lease_expires_at) })] : null));

    if (!run) { box.appendChild(h('p', { class: 'muted', text: 'No run yet.' })); return; }
    if (runs.length > 1) {
      box.appendChild(h('h3', { text: 'Runs' }));
      box.appendChild(h('div', { class: 'run-tabs' }, runs.map(function (r) {
        return h('button', { type: 'button', 'aria-pressed': r.id === run.id ? 'true' : 'false', text: 'run #' + r.id + ' ' + r.phase,
          onclick: function () { selectedRun = r.id; refreshDetail(); } });
      })));
    }
    box.appendChild(h('h3', { text: 'Run #' + run.id }));
    box.appendChild(h('dl', { class: 'meta' },
      h('dt', { text: 'phase' }), h('dd', { 'data-run-phase': run.phase, text: run.phase + (run.stop_reason ? ' / ' + run.stop_reason : '') }),
      h('dt', { text: 'started' }), h('dd', { text: ago(run.started_at) }),
      run.finished_at ? [h('dt', { text: 'finished' }), h('dd', { text: ago(run.finished_at) })] : null,
      run.restarts ? [h('dt', { text: 'restarts' }), h('dd', { text: run.restarts })] : null));

    box.appendChild(h('h3', { text: 'Budget' }));
    box.appendChild(budgetTable(run.budget || {}, run.usage || {}));

    var steps = run.steps || [];
    box.appendChild(h('h3', { text: 'Timeline (' + steps.length + ' steps)' }));
    box.appendChild(h('ol', { class: 'timeline' }, steps.map(stepItem)));

    if (run.envelope) {
      var failed = run.envelope.acceptance && Array.isArray(run.envelope.acceptance.failed) ? run.envelope.acceptance.failed : [];
      box.appendChild(h('h3', { text: 'Result' }));
      if (failed.length) box.appendChild(h('div', { class: 'step-error', text: 'acceptance failed: ' + failed.join(', ') }));
      box.appendChild(h('details', null, h('summary', { text: 'envelope' }), h('pre', { text: show(run.envelope, 20000) })));
    }
  }

  function budgetTable(b, u) {
    var rows = [
      ['steps', u.steps, b.max_steps],
      ['write calls', u.write_calls, b.max_write_calls],
      ['pending approvals', u.pending, b.max_pending],
      ['consecutive failures', u.consecutive_failures, b.max_failures],
      ['tokens', u.tokens, b.max_tokens],
      ['cost', u.cost, b.max_cost],
    ];
    var table = h('table', { class: 'budget' });
    rows.forEach(function (r) {
      if ((r[2] === null || r[2] === undefined) && !r[1]) return;
      var limited = r[2] !== null && r[2] !== undefined;
      var fill = h('div');
      var share = limited && r[2] > 0 ? Math.min(1, (r[1] || 0) / r[2]) : 0;
      fill.style.width = Math.round(share * 100) + '%';
      if (share >= 0.8) fill.className = 'high';
      table.appendChild(h('tr', null, h('td', { text: r[0] }), h('td', { text: (r[1] || 0) + (limited ? ' / ' + r[2] : '') }),
        h('td', null, limited ? h('div', { class: 'bar' }, fill) : null)));
    });
    if (b.deadline) table.appendChild(h('tr', null, h('td', { text: 'deadline' }), h('td', { text: ago(b.deadline) }), h('td')));
    return table;
  }

  function stepItem(s) {
    var error = s.error === null || s.error === undefined ? null : typeof s.error === 'string' ? s.error : s.error.message || show(s.error, 400);
    var detail = [];
    if (s.args !== null && s.args !== undefined) detail.push(h('div', { class: 'muted', text: 'args' }), h('pre', { text: show(s.args, 4000) }));
    if (s.result !== null && s.result !== undefined) detail.push(h('div', { class: 'muted', text: 'result' }), h('pre', { text: show(s.result, 4000) }));
    return h('li', { 'data-status': s.status, 'data-step-tool': s.tool || '' },
      h('div', { class: 'step-head' },
        h('span', { class: 'muted', text: s.seq }),
        h('span', { class: 'step-kind', text: s.kind }),
        s.tool ? h('span', { class: 'step-tool', text: s.tool }) : null,
        h('span', { class: 'step-status', text: s.status }),
        s.duration_ms !== null && s.duration_ms !== undefined ? h('span', { class: 'muted', text: s.duration_ms + ' ms' }) : null),
      error ? h('div', { class: 'step-error', text: error }) : null,
      detail.length ? h('details', null, h('summary', { class: 'muted', text: 'details' }), detail) : null);
  }

  // ---- start ----------------------------------------------------------------------------

  async function start() {
    setConn('connecting', 'connecting…');
    try {
      await loadTasks();
      connect();
      await loadApprovals();
      loadBreakers();
      if (selected !== null) refreshDetail();
    } catch (e) {
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
  start();
})();
`;

export const BOARD_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>taskloop board</title>
<link rel="icon" href="data:,">
<style>${BOARD_STYLE}</style>
</head>
<body>
<header>
  <h1>taskloop</h1>
  <span id="conn" class="conn" data-conn="connecting">connecting…</span>
  <span id="summary" class="muted"></span>
  <span id="breakers" class="breakers" hidden></span>
  <span class="spacer"></span>
  <button id="stop-all" class="danger" type="button" title="Stop every running task (the backlog is left alone)">Stop all</button>
</header>
<main>
  <section id="board" class="board" aria-label="tasks by state"></section>
  <aside>
    <section class="panel" aria-label="pending approvals">
      <h2>Pending approvals <span id="approvals-count" class="count" data-n="0">0</span></h2>
      <div id="approvals"></div>
    </section>
    <section class="panel" aria-label="task detail">
      <h2>Task</h2>
      <div id="detail"><p class="muted">Click a task to see its run.</p></div>
    </section>
  </aside>
</main>
<div id="toast" role="status" hidden></div>
<script>${BOARD_SCRIPT}</script>
</body>
</html>
`;
