/**
 * The environment of a program taskloop starts (an acceptance `command`, the desktop host and
 * what it runs, `launch_app`): the process's own, less the HTTP server's credentials. A token
 * in TASKLOOP_TOKEN or TASKLOOP_TOKENS acts as its identity over the API (an operator's holds
 * every power); the programs a card starts never need it, and a check's output (kept in its
 * detail, which reviewers read) or a launched program's own reporting would carry it on.
 * Everything else passes (PATH, HOME, DISPLAY, an evaluation script's model key): wrap the
 * command in `env -u NAME` to withhold more.
 */
const WITHHELD = ['TASKLOOP_TOKEN', 'TASKLOOP_TOKENS'] as const;

export function childEnv(base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env = { ...base };
  for (const name of WITHHELD) delete env[name];
  return env;
}
