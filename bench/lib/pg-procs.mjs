/**
 * Forked children of the pg benchmark: start them, wait for each one's `ready`, then send
 * `go` to all at once and collect each one's `done` message with the time it arrived.
 */
import { fork } from 'node:child_process';
import { nowNs } from './util.mjs';

/** A child running `script` with one JSON argument; its messages are awaited by type. */
export function spawnChild(script, config) {
  const child = fork(script, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const waiting = new Map();
  let failure;
  const failed = new Promise((_, reject) => {
    child.on('error', (err) => reject((failure = err)));
    child.on('exit', (code) => {
      if (code !== 0) reject((failure = new Error(`${config.role ?? config.kind} child exited with ${code}`)));
    });
  });
  failed.catch(() => undefined);
  child.on('message', (m) => {
    const w = waiting.get(m.type);
    if (w !== undefined) {
      waiting.delete(m.type);
      w({ ...m, at: nowNs() });
    }
  });
  return {
    child,
    /** The next message of `type` (registered before it can arrive: call before the trigger). */
    next(type) {
      if (failure !== undefined) return Promise.reject(failure);
      return Promise.race([failed, new Promise((resolve) => waiting.set(type, resolve))]);
    },
    send(msg) {
      child.send(msg);
    },
    exited() {
      return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', r));
    },
    kill() {
      if (child.exitCode === null) child.kill();
    },
  };
}

/**
 * Starts `configs.length` children of `script`, times from `go` to the last `done`.
 * Returns { seconds, results: the done messages in child order }.
 */
export async function runTimed(script, configs) {
  const children = configs.map((c) => spawnChild(script, c));
  try {
    await Promise.all(children.map((c) => c.next('ready')));
    const done = children.map((c) => c.next('done'));
    const t0 = nowNs();
    for (const c of children) c.send({ type: 'go' });
    const results = await Promise.all(done);
    const end = results.reduce((max, r) => (r.at > max ? r.at : max), t0);
    return { seconds: Number(end - t0) / 1e9, results };
  } catch (err) {
    for (const c of children) c.kill();
    throw err;
  } finally {
    await Promise.allSettled(children.map((c) => c.exited()));
  }
}
