// @ts-check
/* The columns: every task as a card in its state's column. */

const PAGE = 1000;
const MAX_CARDS = 300;

/** @type {Map<number, BoardTask>} */
const tasks = new Map();
/** The task shown in the detail pane. @type {number | null} */
let selected = null;
let renderQueued = false;

/** How a finished task ended: the phase in its result envelope. @param {unknown} result */
function outcomeOf(result) {
  if (result === null || typeof result !== 'object') return null;
  const phase = /** @type {{ phase?: unknown }} */ (result).phase;
  return typeof phase === 'string' ? phase : null;
}

/** @param {WireTask} task @returns {BoardTask} */
function slim(task) {
  const { card: body, result, ...rest } = task;
  const t = /** @type {BoardTask & { events?: unknown, runs?: unknown }} */ ({ ...rest, goal: body && typeof body.goal === 'string' ? body.goal : null, outcome: outcomeOf(result) });
  delete t.events;
  delete t.runs;
  return t;
}

/** Every task, page by page; the first page's cursor is where the event stream starts. */
async function loadTasks() {
  /** @type {WireTask[]} */
  let all = [];
  let after = 0;
  for (let page = 0; page < 50; page++) {
    /** @type {{ tasks: WireTask[], last_event_id: number }} */
    const r = await api('GET', `/api/tasks?limit=${PAGE}${after ? `&after=${after}` : ''}`);
    // The cursor of the first page: events after it cover every change since that read.
    if (page === 0) lastEventId = r.last_event_id;
    all = all.concat(r.tasks);
    if (r.tasks.length < PAGE) break;
    after = r.tasks[r.tasks.length - 1].id;
  }
  tasks.clear();
  for (const t of all) tasks.set(t.id, slim(t));
  queueRender();
}

function queueRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderBoard();
  });
}

/** @param {string} state @returns {(a: BoardTask, b: BoardTask) => number} */
function sortFor(state) {
  if (TERMINAL[state]) return (a, b) => (b.updated_at ?? '').localeCompare(a.updated_at ?? '') || b.id - a.id;
  return (a, b) => b.priority - a.priority || a.id - b.id;
}

function renderBoard() {
  /** @type {Record<string, BoardTask[]>} */
  const groups = {};
  for (const s of STATES) groups[s] = [];
  for (const t of tasks.values()) (groups[t.state] ??= []).push(t);
  const board = byId('board');
  /** @type {Record<string, number>} */
  const scroll = {};
  board.querySelectorAll('.cards').forEach((c) => {
    const column = c.parentElement?.getAttribute('data-column');
    if (column) scroll[column] = c.scrollTop;
  });
  clear(board);
  /** @type {string[]} */
  const summary = [];
  for (const state of STATES) {
    const list = groups[state].sort(sortFor(state));
    if (list.length > 0) summary.push(`${list.length} ${state.replace('_', ' ')}`);
    const cards = h('div', { class: 'cards' },
      list.slice(0, MAX_CARDS).map(card),
      list.length > MAX_CARDS ? h('div', { class: 'more', text: `+${list.length - MAX_CARDS} more` }) : null);
    board.appendChild(h('section', { class: 'column', 'data-column': state, 'data-state': state },
      h('h2', null, h('span', { text: state.replace('_', ' ') }), h('span', { class: 'count', 'data-count': state, text: list.length })),
      cards));
    cards.scrollTop = scroll[state] ?? 0;
  }
  byId('summary').textContent = `${tasks.size} tasks${summary.length ? `: ${summary.join(', ')}` : ''}`;
}

/** A completed task that ended degraded is marked so: it is not a clean success. @param {BoardTask} t */
const degraded = (t) => t.state === 'completed' && t.outcome === 'degraded';

/** @param {BoardTask} t */
function card(t) {
  const meta = [];
  if (t.assignee) meta.push(t.assignee);
  else if (t.queue && t.queue !== 'default') meta.push(`queue ${t.queue}`);
  if (t.priority) meta.push(`p${t.priority}`);
  if (t.attempts > 1) meta.push(`attempt ${t.attempts}`);
  meta.push(ago(t.updated_at));
  return h('div', {
    class: `card${t.id === selected ? ' selected' : ''}`, 'data-task-id': t.id, 'data-state': t.state, 'data-outcome': t.outcome, tabindex: 0, role: 'button',
    onclick: () => select(t.id),
    /** @param {KeyboardEvent} e */
    onkeydown: (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        select(t.id);
      }
    },
  },
  h('div', { class: 'id', text: `#${t.id}` }, degraded(t) ? h('span', { class: 'outcome', 'data-outcome': 'degraded', title: 'completed degraded: a step was skipped (see the run)', text: 'degraded' }) : null),
  h('div', { class: 'title', text: t.title }),
  h('div', { class: 'meta', text: meta.join(' · ') }));
}
