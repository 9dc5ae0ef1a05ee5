// @ts-check
/*
 * The task detail pane: a task's runs, budget, step timeline and Stop button. It keeps the
 * shown run's steps and asks the server only for the steps past the last one that finished
 * (`?steps_after=`): a step is written when it starts and once more when it ends.
 */

/** Step statuses that do not change any more. @type {Record<string, boolean>} */
const FINAL_STEP = { ok: true, failed: true, rejected: true, abandoned: true, not_happened: true };

/**
 * What the pane shows: the task, its run and that run's steps by seq; every step up to
 * `doneThrough` has finished.
 * @typedef {{ taskId: number, runId: number, run: RunDetail, steps: Map<number, WireStep>, doneThrough: number }} RunView
 */
/** @type {RunView | null} */
let shown = null;
/** The run picked among a task's runs (null: its latest). @type {number | null} */
let selectedRun = null;
/** Discards the answers of refreshes that a newer one overtook. */
let detailSeq = 0;

/** @param {number} id */
function select(id) {
  selected = id;
  selectedRun = null;
  shown = null;
  queueRender();
  void refreshDetail();
}

/** The highest seq up to which every step has finished. @param {Map<number, WireStep>} steps @param {number} from */
function finishedThrough(steps, from) {
  let done = from;
  for (let next = steps.get(done + 1); next !== undefined && FINAL_STEP[next.status]; next = steps.get(done + 1)) done++;
  return done;
}

/** Re-reads the selected task (unless the caller just did) and the new steps of its run. @param {TaskDetail} [given] */
async function refreshDetail(given) {
  if (selected === null) return;
  const seq = ++detailSeq;
  const id = selected;
  try {
    /** @type {TaskDetail} */
    const task = given !== undefined && given.id === id ? given : await api('GET', `/api/tasks/${id}?events_after=${lastEventId}`);
    const runs = [...task.runs].sort((a, b) => a.id - b.id);
    const chosen = runs.find((r) => r.id === selectedRun) ?? runs[runs.length - 1];
    /** @type {RunView | null} */
    let view = null;
    if (chosen !== undefined) {
      const same = shown !== null && shown.taskId === id && shown.runId === chosen.id ? shown : null;
      const after = same === null ? 0 : same.doneThrough;
      /** @type {RunDetail} */
      const run = await api('GET', `/api/runs/${chosen.id}${after > 0 ? `?steps_after=${after}` : ''}`);
      if (seq !== detailSeq) return;
      const steps = same === null ? new Map() : same.steps;
      for (const s of run.steps) steps.set(s.seq, s);
      view = { taskId: id, runId: chosen.id, run, steps, doneThrough: finishedThrough(steps, after) };
    }
    if (seq !== detailSeq) return;
    shown = view;
    renderDetail(task, runs, view);
  } catch (e) {
    if (seq !== detailSeq) return;
    const box = byId('detail');
    clear(box);
    box.appendChild(h('p', { class: 'muted', text: `task #${id}: ${messageOf(e)}` }));
  }
}

/** A Stop / Stop all button's action. @param {string} path @param {string} label */
function control(path, label) {
  /** @param {Event} e */
  return async (e) => {
    const button = /** @type {HTMLButtonElement} */ (e.currentTarget ?? e.target);
    button.disabled = true;
    try {
      /** @type {{ tasks?: number[] }} */
      const r = await api('POST', path, {});
      toast(`${label}: ${r.tasks && r.tasks.length ? `task ${r.tasks.join(', ')}` : 'nothing running'}`, 'info');
    } catch (err) {
      toast(`${label}: ${messageOf(err)}`);
    }
    button.disabled = false;
  };
}

function closeDetail() {
  selected = null;
  shown = null;
  const box = byId('detail');
  clear(box);
  box.appendChild(h('p', { class: 'muted', text: 'Click a task to see its run.' }));
  queueRender();
}

/** @param {TaskDetail} task @param {WireRun[]} runs @param {RunView | null} view */
function renderDetail(task, runs, view) {
  const box = byId('detail');
  clear(box);
  // The detail trusts the run's own phase (the loop wrote it), not the task's result field.
  const last = runs[runs.length - 1];
  const outcome = last === undefined ? null : last.phase;
  box.appendChild(h('div', { class: 'detail-title', 'data-detail-task': task.id, text: `#${task.id} ${task.title}` }));
  box.appendChild(h('div', null,
    h('span', { class: 'badge', 'data-state': task.state, 'data-detail-state': task.state, text: task.state }),
    task.state === 'completed' && outcome === 'degraded'
      ? h('span', { class: 'outcome', 'data-detail-outcome': 'degraded', text: 'degraded: completed with a step skipped' })
      : null));
  const actions = h('div', { class: 'detail-actions' });
  if (STOPPABLE[task.state]) actions.appendChild(h('button', { class: 'danger', type: 'button', 'data-action': 'stop', text: 'Stop', onclick: control(`/api/tasks/${task.id}/stop`, `stop #${task.id}`) }));
  actions.appendChild(h('button', { type: 'button', text: 'Close', onclick: closeDetail }));
  box.appendChild(actions);

  const goal = task.card && typeof task.card.goal === 'string' ? task.card.goal : null;
  box.appendChild(h('dl', { class: 'meta' },
    goal ? [h('dt', { text: 'goal' }), h('dd', { text: goal })] : null,
    h('dt', { text: 'creator' }), h('dd', { text: task.creator }),
    h('dt', { text: 'assignee' }), h('dd', { text: task.assignee || '—' }),
    h('dt', { text: 'queue' }), h('dd', { text: task.queue }),
    h('dt', { text: 'priority' }), h('dd', { text: task.priority }),
    h('dt', { text: 'attempts' }), h('dd', { text: `${task.attempts} of ${task.max_attempts}` }),
    h('dt', { text: 'created' }), h('dd', { text: ago(task.created_at) }),
    h('dt', { text: 'updated' }), h('dd', { text: ago(task.updated_at) }),
    task.lease_expires_at ? [h('dt', { text: 'lease' }), h('dd', { text: `expires ${ago(task.lease_expires_at)}` })] : null));

  if (view === null) {
    box.appendChild(h('p', { class: 'muted', text: 'No run yet.' }));
    return;
  }
  const run = view.run;
  if (runs.length > 1) {
    box.appendChild(h('h3', { text: 'Runs' }));
    box.appendChild(h('div', { class: 'run-tabs' }, runs.map((r) => h('button', {
      type: 'button', 'aria-pressed': r.id === run.id ? 'true' : 'false', text: `run #${r.id} ${r.phase}`,
      onclick: () => {
        selectedRun = r.id;
        void refreshDetail();
      },
    }))));
  }
  box.appendChild(h('h3', { text: `Run #${run.id}` }));
  box.appendChild(h('dl', { class: 'meta' },
    h('dt', { text: 'phase' }), h('dd', { 'data-run-phase': run.phase, text: run.phase + (run.stop_reason ? ` / ${run.stop_reason}` : '') }),
    h('dt', { text: 'started' }), h('dd', { text: ago(run.started_at) }),
    run.finished_at ? [h('dt', { text: 'finished' }), h('dd', { text: ago(run.finished_at) })] : null,
    run.restarts ? [h('dt', { text: 'restarts' }), h('dd', { text: run.restarts })] : null));

  box.appendChild(h('h3', { text: 'Budget' }));
  box.appendChild(budgetTable(run));

  // A desktop run: the latest screen it observed, i.e. what the planner last saw.
  if (run.screen) {
    const src = withKey(`${run.screen.url}?seq=${run.screen.seq}`);
    box.appendChild(h('h3', { text: `Screen (step #${run.screen.seq}, ${ago(run.screen.taken_at)})` }));
    box.appendChild(h('a', { href: src, target: '_blank', rel: 'noopener' },
      h('img', { class: 'screen', 'data-screen-seq': run.screen.seq, src, alt: `the screen run #${run.id} last observed` })));
  }

  const steps = [...view.steps.values()].sort((a, b) => a.seq - b.seq);
  box.appendChild(h('h3', { text: `Timeline (${steps.length} steps)` }));
  box.appendChild(h('ol', { class: 'timeline' }, steps.map(stepItem)));

  if (run.envelope) {
    const failed = run.envelope.acceptance && Array.isArray(run.envelope.acceptance.failed) ? run.envelope.acceptance.failed : [];
    box.appendChild(h('h3', { text: 'Result' }));
    if (failed.length) box.appendChild(h('div', { class: 'step-error', text: `acceptance failed: ${failed.join(', ')}` }));
    box.appendChild(h('details', null, h('summary', { text: 'envelope' }), h('pre', { text: show(run.envelope, 20000) })));
  }
}

/** Use against limits; the deadline counts down only while the run is live. @param {RunDetail} run */
function budgetTable(run) {
  const b = run.budget;
  const u = run.usage;
  /** @type {Array<[string, number | undefined, number | null | undefined]>} */
  const rows = [
    ['steps', u?.steps, b?.max_steps],
    ['write calls', u?.write_calls, b?.max_write_calls],
    ['pending approvals', u?.pending, b?.max_pending],
    ['consecutive failures', u?.consecutive_failures, b?.max_failures],
    ['tokens', u?.tokens, b?.max_tokens],
    ['cost', u?.cost, b?.max_cost],
  ];
  const table = h('table', { class: 'budget' });
  for (const [label, used, limit] of rows) {
    if ((limit === null || limit === undefined) && !used) continue;
    const limited = limit !== null && limit !== undefined;
    const fill = h('div');
    const share = limited && limit > 0 ? Math.min(1, (used ?? 0) / limit) : 0;
    fill.style.width = `${Math.round(share * 100)}%`;
    if (share >= 0.8) fill.className = 'high';
    table.appendChild(h('tr', null, h('td', { text: label }), h('td', { text: (used ?? 0) + (limited ? ` / ${limit}` : '') }),
      h('td', null, limited ? h('div', { class: 'bar' }, fill) : null)));
  }
  if (b?.deadline) {
    // A finished run has no time left to count: it shows when the deadline was, not "in 5m".
    const finished = run.finished_at !== null;
    const text = finished ? `${new Date(b.deadline).toLocaleString()} (run finished)` : ago(b.deadline);
    table.appendChild(h('tr', null, h('td', { text: 'deadline' }), h('td', { 'data-deadline': finished ? 'finished' : 'live', text }), h('td')));
  }
  return table;
}

/** @param {WireStep} s */
function stepItem(s) {
  const error = s.error === null || s.error === undefined ? null
    : typeof s.error === 'string' ? s.error
      : typeof s.error === 'object' && 'message' in s.error && typeof s.error.message === 'string' ? s.error.message : show(s.error, 400);
  /** @type {HTMLElement[]} */
  const detail = [];
  if (s.args !== null && s.args !== undefined) detail.push(h('div', { class: 'muted', text: 'args' }), h('pre', { text: show(s.args, 4000) }));
  if (s.result !== null && s.result !== undefined) detail.push(h('div', { class: 'muted', text: 'result' }), h('pre', { text: show(s.result, 4000) }));
  return h('li', { 'data-status': s.status, 'data-step-seq': s.seq, 'data-step-tool': s.tool ?? '' },
    h('div', { class: 'step-head' },
      h('span', { class: 'muted', text: s.seq }),
      h('span', { class: 'step-kind', text: s.kind }),
      s.tool ? h('span', { class: 'step-tool', text: s.tool }) : null,
      h('span', { class: 'step-status', text: s.status }),
      s.duration_ms !== null && s.duration_ms !== undefined ? h('span', { class: 'muted', text: `${s.duration_ms} ms` }) : null),
    error ? h('div', { class: 'step-error', text: error }) : null,
    detail.length ? h('details', null, h('summary', { class: 'muted', text: 'details' }), detail) : null);
}
