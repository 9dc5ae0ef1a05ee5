/** taskloop scenarios: create, one-process lifecycle, N-process lifecycle, claim latency. */
import Database from 'better-sqlite3';
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createSqliteStore, createTaskManager } from '../../dist/engine/index.js';
import { log, nowNs, percentile, seconds } from './util.mjs';

export const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
export const ACCEPTANCE = Object.freeze({ id: 'acceptance', role: 'system' });
const WORKER = fileURLToPath(new URL('../queue-worker.mjs', import.meta.url));

export function openManager(path) {
  return createTaskManager({ store: createSqliteStore({ path, durability: 'normal' }) });
}

const input = (i) => ({ title: `task ${i}`, card: { goal: 'benchmark', n: i } });

/** Creates n tasks through the API in batches of 1,000 (the batch limit); untimed set-up. */
export async function precreate(manager, n) {
  for (let from = 0; from < n; from += 1000) {
    const batch = [];
    for (let i = from; i < Math.min(n, from + 1000); i++) batch.push(input(i));
    await manager.createTasks(batch, OPERATOR);
  }
}

/** One task through claim(start) → review → completed, as an agent and the acceptance runner. */
export async function drainOne(manager, agent) {
  const task = await manager.claimTask({ agent, start: true });
  if (task === null) return false;
  await manager.transitionTask({
    taskId: task.id,
    to: 'review',
    actor: { id: agent, role: 'agent' },
    claimToken: task.claimToken,
    then: [{ to: 'completed', actor: ACCEPTANCE }],
  });
  return true;
}

/** 1. createTask one by one. */
export async function benchCreate(path, n) {
  const manager = openManager(path);
  try {
    const t0 = nowNs();
    for (let i = 0; i < n; i++) await manager.createTask(input(i), OPERATOR);
    const s = seconds(t0, nowNs());
    return { ops: n, seconds: s, perSec: n / s };
  } finally {
    await manager.close();
  }
}

/** 2. Full lifecycle in this process. */
export async function benchLifecycle(path, n) {
  const manager = openManager(path);
  try {
    await precreate(manager, n);
    const t0 = nowNs();
    let done = 0;
    while (await drainOne(manager, 'agent-1')) done++;
    const s = seconds(t0, nowNs());
    if (done !== n) throw new Error(`lifecycle: drained ${done} of ${n}`);
    return { ops: done, seconds: s, perSec: done / s, check: verify(path, n) };
  } finally {
    await manager.close();
  }
}

/** 3. Full lifecycle by `procs` forked workers on one file, started together by a handshake. */
export async function benchLifecycleProcs(path, n, procs) {
  const manager = openManager(path);
  await precreate(manager, n);
  await manager.close();

  const children = [];
  const ready = [];
  const done = [];
  for (let i = 0; i < procs; i++) {
    const child = fork(WORKER, [path, `agent-${i + 1}`], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    children.push(child);
    const failed = new Promise((_, reject) => {
      child.on('error', reject);
      child.on('exit', (code) => code !== 0 && reject(new Error(`worker ${i + 1} exited with ${code}`)));
    });
    ready.push(Promise.race([failed, new Promise((resolve) => child.once('message', resolve))]));
    done.push(
      Promise.race([
        failed,
        new Promise((resolve) => child.on('message', (m) => m.type === 'done' && resolve({ ...m, at: nowNs() }))),
      ]),
    );
  }
  try {
    await Promise.all(ready);
    const t0 = nowNs();
    for (const child of children) child.send({ type: 'go' });
    const results = await Promise.all(done);
    const end = results.reduce((max, r) => (r.at > max ? r.at : max), t0);
    const s = seconds(t0, end);
    const total = results.reduce((sum, r) => sum + r.count, 0);
    const check = verify(path, n);
    if (total !== n) throw new Error(`${procs} processes drained ${total} of ${n}`);
    return { ops: total, seconds: s, perSec: total / s, perWorker: results.map((r) => r.count), check };
  } catch (err) {
    for (const child of children) if (child.exitCode === null) child.kill();
    throw err;
  } finally {
    await Promise.allSettled(children.map((c) => (c.exitCode === null ? new Promise((r) => c.once('exit', r)) : null)));
  }
}

/** Every task completed exactly once: counts by state and by event type. Throws on a mismatch. */
export function verify(path, n) {
  const db = new Database(path, { readonly: true });
  try {
    const byState = Object.fromEntries(db.prepare('SELECT state, count(*) AS n FROM tasks GROUP BY state').all().map((r) => [r.state, r.n]));
    const count = (sql) => db.prepare(sql).get().n;
    const claimed = count("SELECT count(*) AS n FROM task_events WHERE type = 'task.claimed'");
    const twice = count("SELECT count(*) AS n FROM (SELECT task_id FROM task_events WHERE type = 'task.claimed' GROUP BY task_id HAVING count(*) <> 1)");
    const completedEvents = count(`SELECT count(*) AS n FROM task_events WHERE type = 'task.transitioned' AND data ->> '$.to' = 'completed'`);
    const ok = byState.completed === n && Object.keys(byState).length === 1 && claimed === n && twice === 0 && completedEvents === n;
    const summary = `states ${JSON.stringify(byState)}, task.claimed events ${claimed}, tasks claimed ≠ once ${twice}, completions ${completedEvents}`;
    if (!ok) throw new Error(`verification failed: ${summary}`);
    return summary;
  } finally {
    db.close();
  }
}

/** Inserts `count` pending tasks straight into `tasks` in one transaction (migrations ran already). */
function bulkInsert(path, count) {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    const now = Date.now();
    const insert = db.prepare(
      `INSERT INTO tasks (title, state, priority, creator, max_attempts, queue, run_after, unmet_deps, created_at, updated_at, card)
       VALUES (?, 'pending', 0, 'operator', 3, 'default', 0, 0, ?, ?, '{}')`,
    );
    db.transaction(() => {
      for (let i = 0; i < count; i++) insert.run(`task ${i}`, now, now);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
}

/**
 * 4. Claim latency with a small and a big backlog, measured interleaved: the two stores are
 * open side by side and every round times one claim on each (alternating which goes first),
 * so disk and checkpoint noise fall on both alike. After each timed claim one task is created
 * (untimed), so exactly `backlog` tasks are pending at every timed claim.
 */
export async function benchClaimLatency(paths, backlogs, samples, warmup) {
  const sides = [];
  for (let k = 0; k < paths.length; k++) {
    await createSqliteStore({ path: paths[k] }).close(); // runs the migrations
    const t0 = nowNs();
    bulkInsert(paths[k], backlogs[k]);
    log(`  backlog of ${backlogs[k].toLocaleString('en-US')} inserted in ${seconds(t0, nowNs()).toFixed(1)} s`);
    sides.push({ backlog: backlogs[k], manager: openManager(paths[k]), lat: [] });
  }
  try {
    for (let i = 0; i < warmup + samples; i++) {
      const order = i % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) {
        const start = nowNs();
        const task = await side.manager.claimTask({ agent: 'agent-1' });
        const us = Number(nowNs() - start) / 1000;
        if (task === null) throw new Error('claim latency: the backlog ran dry');
        if (i >= warmup) side.lat.push(us);
        await side.manager.createTask(input(i), OPERATOR);
      }
    }
    return sides.map(({ backlog, manager, lat }) => {
      const pending = manager.store.db.prepare("SELECT count(*) AS n FROM tasks WHERE state = 'pending'").get().n;
      if (pending !== backlog) throw new Error(`claim latency: ${pending} pending at the end, expected ${backlog}`);
      lat.sort((a, b) => a - b);
      const at = (p) => percentile(lat, p);
      const over1ms = lat.filter((x) => x > 1000).length;
      return { backlog, samples, p50: at(50), p90: at(90), p99: at(99), p999: at(99.9), max: lat[lat.length - 1], over1ms };
    });
  } finally {
    for (const side of sides) await side.manager.close();
  }
}
