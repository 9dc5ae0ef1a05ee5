/**
 * Daemon processes for the loop benchmark: `node bin/taskloop --db FILE daemon --tools
 * bench/lib/loop-tools.mjs …`, started as child processes and watched through their stderr.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = fileURLToPath(new URL('../../bin/taskloop', import.meta.url));
/** The daemon runs with the repository as its working directory, so the path is relative to it. */
export const LOOP_TOOLS = 'bench/lib/loop-tools.mjs';

const live = new Set();
/** Kills every daemon still running (on a failed scenario, and at exit). */
export function killAll() {
  for (const child of live) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}
process.once('exit', killAll);

/** Waits until `probe()` returns something other than undefined/false; polls every `everyMs`. */
export async function waitFor(probe, timeoutMs, what, everyMs = 10) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * Starts a daemon and resolves once its stderr says it started; `env` is added to ours. `cpus`
 * (a taskset list such as '1') pins the daemon, all its threads, to those CPUs (taskset execs
 * node, so the child's pid is the daemon's).
 */
export async function startDaemonProcess(db, workers, extra = [], env = {}, cpus = undefined) {
  const args = [BIN, '--db', db, 'daemon', '--workers', String(workers), '--tools', LOOP_TOOLS, ...extra];
  const child = spawn(cpus === undefined ? process.execPath : 'taskset', cpus === undefined ? args : ['-c', cpus, process.execPath, ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  live.add(child);
  const lines = [];
  let buffer = '';
  child.stderr.on('data', (chunk) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop();
    lines.push(...parts);
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    live.delete(child);
    resolve({ code, signal });
  }));
  const d = {
    child,
    lines,
    exited,
    spawnedAt: Date.now(),
    /** Sends SIGTERM and resolves with the exit code (throws after `timeoutMs`). */
    async terminate(timeoutMs = 20_000) {
      child.kill('SIGTERM');
      const r = await Promise.race([exited, sleep(timeoutMs, null, { ref: false })]);
      if (r === null) throw new Error(`daemon ${child.pid} did not exit within ${timeoutMs} ms of SIGTERM\n${lines.join('\n')}`);
      return r;
    },
  };
  let failed = null;
  exited.then((r) => (failed = r));
  await waitFor(() => {
    if (failed !== null) throw new Error(`daemon exited (${JSON.stringify(failed)}) before it started\n${lines.join('\n')}`);
    return lines.some((l) => /daemon .* started/.test(l));
  }, 20_000, `the daemon's start line\n${lines.join('\n')}`);
  d.startedAt = Date.now();
  return d;
}

/** `taskloop --db FILE <args…>`, synchronously; returns { code, stdout, stderr }. */
export function cli(db, args) {
  const r = spawnSync(process.execPath, [BIN, '--db', db, ...args], { cwd: ROOT, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout.trim(), stderr: r.stderr.trim() };
}

/** Lines that point at trouble in a daemon's log (failed workers, lost claims, errors). */
export function troubleLines(lines) {
  return lines.filter((l) => /failed:|claim lost|error|grace period/i.test(l) && !/: (completed|cancelled) \(/.test(l));
}
