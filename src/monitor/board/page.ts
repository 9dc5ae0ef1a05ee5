/**
 * The board page's source: HTML, inline CSS and plain browser JavaScript (no framework, no
 * bundler). Kept as string constants so `tsc` carries it into dist/ with nothing to copy.
 * The HTML is here; the CSS is in page-style.ts and the script in page-script.ts and
 * page-detail.ts (see the rules there).
 */
import { BOARD_SCRIPT } from './page-script.js';
import { BOARD_STYLE } from './page-style.js';

export { BOARD_SCRIPT, BOARD_STYLE };

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
  <span id="who" class="muted"></span>
  <button id="sign-out" type="button" hidden>Sign out</button>
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
<div id="signin" class="signin" hidden>
  <form id="signin-form" autocomplete="off" aria-label="sign in">
    <h2>Sign in to taskloop</h2>
    <p class="muted">Open the sign-in link the server printed at start, or paste a token: TASKLOOP_TOKEN, one of TASKLOOP_TOKENS, or the one in the token file the server printed (DB.http-token). The browser keeps a session cookie, not the token.</p>
    <input id="signin-token" type="password" placeholder="token" aria-label="token" required>
    <button type="submit" class="ok">Sign in</button>
    <p id="signin-error" class="error" hidden></p>
  </form>
</div>
<script>${BOARD_SCRIPT}</script>
</body>
</html>
`;
