// @ts-check
/* Start: sign in (link or token), load, follow. Runs last (board.ts joins the scripts in order). */

async function start() {
  if (!byId('signin').hidden) return;
  setConn('connecting', 'connecting…');
  try {
    /** @type {Session} */
    const me = await api('GET', '/api/session');
    byId('who').textContent = `${me.actor.id} (${me.actor.role})`;
    byId('sign-out').hidden = false;
    await loadTasks();
    connect();
    await loadApprovals();
    void loadBreakers();
    if (selected !== null) void refreshDetail();
  } catch (e) {
    if (statusOf(e) === 401) return; // the sign-in form is up; it starts the board again
    setConn('closed', 'disconnected');
    toast(`cannot load the board: ${messageOf(e)}`);
    setTimeout(start, 3000);
  }
}

byId('stop-all').addEventListener('click', (e) => {
  if (!window.confirm('Stop every running task?')) return;
  void control('/api/tasks/stop-all', 'stop all')(e);
});
// Approvals expire and relative times age without events: a slow refresh keeps them honest.
setInterval(() => {
  void loadApprovals();
  void loadBreakers();
  queueRender();
}, 15000);
void signInFromLink().then(start);
