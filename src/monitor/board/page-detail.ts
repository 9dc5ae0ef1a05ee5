/** The board script's task detail pane: a task's runs, budget, step timeline and stop button. */
/*
 * Rules for the script (it sits in String.raw template literals): no backticks and no
 * dollar-brace sequences; put data into the DOM only through textContent / setAttribute
 * (the helper `h`), never innerHTML — titles, goals, args and errors come from users and agents.
 */
export const DETAIL_SCRIPT = String.raw`
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

    // A desktop run: the latest screen it observed, i.e. what the planner last saw.
    if (run.screen) {
      box.appendChild(h('h3', { text: 'Screen (step #' + run.screen.seq + ', ' + ago(run.screen.taken_at) + ')' }));
      box.appendChild(h('a', { href: run.screen.url + '?seq=' + run.screen.seq, target: '_blank', rel: 'noopener' },
        h('img', { class: 'screen', 'data-screen-seq': run.screen.seq, src: run.screen.url + '?seq=' + run.screen.seq, alt: 'the screen run #' + run.id + ' last observed' })));
    }

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

`;
