// @ts-check
/* Pending approvals (Approve / Reject) and the breakers' state from GET /metrics. */

/** @type {WireApproval[]} */
let approvals = [];

async function loadApprovals() {
  try {
    /** @type {{ approvals: WireApproval[] }} */
    const r = await api('GET', '/api/approvals');
    approvals = r.approvals;
    renderApprovals();
  } catch (e) {
    toast(`approvals: ${messageOf(e)}`);
  }
}

/** @param {WireApproval} a @param {'approve' | 'reject'} what @param {HTMLElement} button */
function decide(a, what, button) {
  return async () => {
    button.parentElement?.querySelectorAll('button').forEach((b) => { b.disabled = true; });
    try {
      await api('POST', `/api/approvals/${a.id}/${what}`, {});
      toast(`approval #${a.id} ${what === 'approve' ? 'approved' : 'rejected'}`, 'info');
    } catch (e) {
      toast(`${what} #${a.id}: ${messageOf(e)}`);
    }
    void loadApprovals();
  };
}

function renderApprovals() {
  const box = byId('approvals');
  clear(box);
  const count = byId('approvals-count');
  count.textContent = String(approvals.length);
  count.setAttribute('data-n', String(approvals.length));
  if (approvals.length === 0) {
    box.appendChild(h('p', { class: 'muted', text: 'Nothing waiting for a decision.' }));
    return;
  }
  for (const a of approvals) {
    const task = tasks.get(a.task_id);
    const approve = h('button', { class: 'ok', type: 'button', 'data-action': 'approve', text: 'Approve' });
    const reject = h('button', { class: 'danger', type: 'button', 'data-action': 'reject', text: 'Reject' });
    approve.addEventListener('click', decide(a, 'approve', approve));
    reject.addEventListener('click', decide(a, 'reject', reject));
    box.appendChild(h('div', { class: 'approval', 'data-approval-id': a.id, 'data-task-id': a.task_id },
      h('div', null, h('span', { class: 'tool', text: a.tool }), ' for ',
        h('a', {
          href: '#',
          text: `task #${a.task_id}`,
          /** @param {Event} e */
          onclick: (e) => {
            e.preventDefault();
            select(a.task_id);
          },
        })),
      task ? h('div', { class: 'muted', text: task.title }) : null,
      h('pre', { text: show(a.args, 600) }),
      h('div', { class: 'muted', text: `approval #${a.id}${a.expires_at ? ` · expires ${ago(a.expires_at)}` : ''}` }),
      h('div', { class: 'actions' }, approve, reject)));
  }
}

/** The breakers from GET /metrics (`taskloop_breaker_open`), when the server has it. */
async function loadBreakers() {
  const el = byId('breakers');
  try {
    const res = await fetch('/metrics', { cache: 'no-store', headers: keyHeader() });
    if (!res.ok) {
      el.hidden = true;
      return;
    }
    const open = [];
    for (const line of (await res.text()).split('\n')) {
      if (!line.startsWith('taskloop_breaker_open{')) continue;
      /** @type {Record<string, string>} */
      const labels = {};
      for (const m of line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
      if (Number(line.trim().split(' ').pop()) > 0) open.push(`${labels.tool} (${labels.state})`);
    }
    el.hidden = false;
    el.setAttribute('data-open', open.length > 0 ? 'true' : 'false');
    el.textContent = open.length > 0 ? `breaker open: ${open.join(', ')}` : 'breakers closed';
  } catch {
    el.hidden = true;
  }
}
