// @ts-check
/* Signing in: every server requires a credential (src/monitor/http/session.ts). */

/** Shows the sign-in form (and stops the stream): no session, or it ended. @param {string} [message] */
function askToken(message) {
  disconnect();
  setConn('closed', 'signed out');
  byId('who').textContent = '';
  byId('sign-out').hidden = true;
  const box = byId('signin');
  const wasHidden = box.hidden;
  box.hidden = false;
  const err = byId('signin-error');
  err.hidden = !message;
  err.textContent = message ?? '';
  if (wasHidden) byId('signin-token').focus();
}

const tokenInput = /** @type {HTMLInputElement} */ (byId('signin-token'));

byId('signin-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  try {
    /** @type {{ session_key: string }} */
    const signedIn = await api('POST', '/api/session', { token: tokenInput.value });
    keepSessionKey(signedIn.session_key);
    tokenInput.value = '';
    byId('signin').hidden = true;
    void start();
  } catch (err) {
    askToken(statusOf(err) === 401 ? 'That token is not valid.' : messageOf(err));
  }
});

/**
 * A one-time sign-in link (?signin=CODE, printed by the server): the code leaves the address
 * bar and the history before anything else happens, then is traded for a session cookie.
 */
async function signInFromLink() {
  const params = new URLSearchParams(window.location.search);
  const code = params.get('signin');
  if (code === null) return;
  params.delete('signin');
  const rest = params.toString();
  window.history.replaceState(null, '', window.location.pathname + (rest ? `?${rest}` : '') + window.location.hash);
  try {
    /** @type {{ session_key: string }} */
    const signedIn = await api('POST', '/api/session', { code });
    keepSessionKey(signedIn.session_key);
  } catch (err) {
    askToken(statusOf(err) === 401 ? 'That sign-in link was used already or has expired. Paste a token instead.' : messageOf(err));
  }
}

byId('sign-out').addEventListener('click', async () => {
  try {
    await api('DELETE', '/api/session');
  } catch {
    // signed out either way
  }
  keepSessionKey(null);
  askToken();
});
