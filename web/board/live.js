// @ts-check
/*
 * Live updates over GET /api/events. The stream's ids are the event log's cursor: the board
 * fetches only what an event says changed — the task's row (its events past the cursor,
 * which are none or a few: the stream delivered the rest) and, for the open detail, the
 * run's steps past the last finished one. Bursts are batched (FLUSH_MS).
 */

const FLUSH_MS = 120;
/** The newest event the board has seen. */
let lastEventId = 0;
/** @type {EventSource | null} */
let source = null;
/** @type {Set<number>} */
const dirtyTasks = new Set();
let approvalsDirty = false;
let breakersDirty = false;
/** @type {ReturnType<typeof setTimeout> | null} */
let flushTimer = null;

/** @param {string} state @param {string} [text] */
function setConn(state, text) {
  const el = byId('conn');
  el.setAttribute('data-conn', state);
  el.textContent = text ?? state;
}

function disconnect() {
  if (source) source.close();
  source = null;
}

function connect() {
  disconnect();
  const stream = new EventSource(withKey(`/api/events?after=${encodeURIComponent(lastEventId)}`));
  source = stream;
  stream.onopen = () => setConn('live');
  stream.onmessage = (m) => {
    /** @type {WireEvent} */
    let ev;
    try {
      ev = JSON.parse(m.data);
    } catch {
      return;
    }
    if (m.lastEventId) lastEventId = Number(m.lastEventId);
    onEvent(ev);
  };
  stream.onerror = () => {
    if (stream.readyState === EventSource.CLOSED) {
      // The server refused the stream (or is gone for good): start over in a moment.
      setConn('closed', 'disconnected');
      stream.close();
      setTimeout(start, 3000);
    } else {
      setConn('reconnecting', 'reconnecting…');
    }
  };
}

/** @param {WireEvent} ev */
function onEvent(ev) {
  if (ev.task_id !== null && ev.task_id !== undefined) dirtyTasks.add(ev.task_id);
  const type = String(ev.type ?? '');
  if (type.startsWith('approval.') || type === 'task.transitioned' || type === 'run.finished') approvalsDirty = true;
  if (type === 'run.finished' || type === 'run.step_finished' || type.startsWith('breaker.')) breakersDirty = true;
  if (!flushTimer) flushTimer = setTimeout(flush, FLUSH_MS);
}

async function flush() {
  flushTimer = null;
  const ids = [...dirtyTasks];
  dirtyTasks.clear();
  const cursor = lastEventId;
  await Promise.all(ids.map(async (id) => {
    try {
      /** @type {TaskDetail} */
      const full = await api('GET', `/api/tasks/${id}?events_after=${cursor}`);
      tasks.set(id, slim(full));
      if (id === selected) void refreshDetail(full);
    } catch (e) {
      if (statusOf(e) === 404) tasks.delete(id);
    }
  }));
  queueRender();
  if (approvalsDirty) {
    approvalsDirty = false;
    void loadApprovals();
  }
  if (breakersDirty) {
    breakersDirty = false;
    void loadBreakers();
  }
}
