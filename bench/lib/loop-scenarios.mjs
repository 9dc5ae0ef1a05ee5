/**
 * Scenarios 2–4 of the loop benchmark, against daemon processes: pickup latency, tasks per
 * second through one daemon, and recovery after a kill -9.
 */
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSqliteRunStore, createSqliteStore, createTaskManager } from '../../dist/engine/index.js';
import { cli, startDaemonProcess, troubleLines, waitFor } from './loop-daemon.mjs';
import { OPERATOR } from './loop-steps.mjs';
import { cpuSecondsOf, percentile } from './util.mjs';

const ACCEPT = Object.freeze({ checks: [{ id: 'tools_ok', tools_subset: true }] });
const nowUs = () => performance.timeOrigin * 1000 + performance.now() * 1000;

function open(path) {
  const store = createSqliteStore({ path });
  return { store, tm: createTaskManager({ store }), runs: createSqliteRunStore(store) };
}

/** Counts by state, read straight from the file (one short read). */
function stateCounts(db) {
  return Object.fromEntries(db.prepare('SELECT state, count(*) AS n FROM tasks GROUP BY state').all().map((r) => [r.state, r.n]));
}

const dist = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1], min: s[0] };
};


/**
 * 2. Pickup latency. A daemon (2 workers) runs; this process creates `tasks` tasks `gapMs`
 * apart, after a warm-up wave of `warmup` tasks at the same pace (reported apart: the first
 * tasks of a fresh daemon are slow), then a sparse wave of `sparse` tasks `sparseGapMs` apart
 * (the pickup path alone, without tasks queueing behind each other). Each card observes with `stamp`, so the first step of its
 * run records when a worker thread got to it. The title carries the creation time taken just
 * before createTask (cards are strict: an unknown card field is refused). Latency = stamp −
 * creation, from the wall clock (performance.timeOrigin + now, as specified) and from
 * CLOCK_MONOTONIC (hrtime: one clock for every process, immune to wall-clock adjustments
 * between the two processes' time origins).
 */
export async function benchPickup(path, { tasks, gapMs, warmup, sparse, sparseGapMs, peers = 0, workers = 2 }) {
  const { tm, runs } = open(path);
  const db = tm.store.db;
  const daemon = await startDaemonProcess(path, workers);
  // Other daemon processes on the same file (issue 12: pickup with a second daemon running).
  const others = [];
  for (let i = 0; i < peers; i++) others.push(await startDaemonProcess(path, workers));
  const card = {
    goal: 'loop benchmark: pickup',
    planner: 'scripted',
    allowed_tools: ['stamp', 'noop'],
    observe: { tool: 'stamp', args: {} },
    budget: { max_steps: 10 },
    acceptance: ACCEPT,
    script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
  };
  let created = 0;
  /** Creates n tasks gapMs apart and waits until all are completed; returns their latencies. */
  const wave = async (n, label, gap = gapMs) => {
    const t0 = performance.now();
    const ids = [];
    for (let i = 0; i < n; i++) {
      const wait = t0 + i * gap - performance.now();
      if (wait > 0.5) await sleep(wait);
      const title = `pickup ${label} ${i} created_us=${nowUs().toFixed(1)} created_mono_ns=${process.hrtime.bigint()}`;
      ids.push((await tm.createTask({ title, card }, OPERATOR)).task.id);
    }
    const createSeconds = (performance.now() - t0) / 1000;
    created += n;
    await waitFor(() => (stateCounts(db).completed ?? 0) >= created || undefined, 120_000, `every ${label} pickup task to complete`, 20);
    const wall = [];
    const mono = [];
    let oneRunEach = true;
    for (const id of ids) {
      const task = await tm.getTask(id);
      const createdUs = Number(/created_us=([\d.]+)/.exec(task.title)[1]);
      const createdMono = BigInt(/created_mono_ns=(\d+)/.exec(task.title)[1]);
      const taskRuns = await runs.runsOf(id);
      if (taskRuns.length !== 1) oneRunEach = false;
      const { steps } = await runs.getRun(taskRuns[0].id);
      const first = steps.find((s) => s.kind === 'observe' && s.status === 'ok');
      if (first === undefined) throw new Error(`pickup: task ${id} has no successful observe step`);
      wall.push((first.result.at_us - createdUs) / 1000);
      mono.push(Number(BigInt(first.result.mono_ns) - createdMono) / 1e6);
    }
    return { createSeconds, wall, mono, oneRunEach };
  };
  try {
    const cold = await wave(warmup, 'warm-up');
    const cpu0 = cpuSecondsOf(daemon.child.pid);
    const timed = await wave(tasks, 'timed');
    const daemonCpuMsPerTask = ((cpuSecondsOf(daemon.child.pid) - cpu0) * 1000) / tasks;
    const slow = await wave(sparse, 'sparse', sparseGapMs);
    const counts = stateCounts(db);
    for (const o of others) await o.terminate();
    const exit = await daemon.terminate();
    return {
      tasks,
      gapMs,
      warmup,
      createSeconds: timed.createSeconds,
      wall: dist(timed.wall),
      mono: dist(timed.mono),
      over10: timed.mono.filter((x) => x > 10).length,
      cold: { first: cold.mono[0], ...dist(cold.mono) },
      sparse: { gapMs: sparseGapMs, ...dist(slow.mono) },
      daemonCpuMsPerTask,
      states: counts,
      oneRunEach: cold.oneRunEach && timed.oneRunEach && slow.oneRunEach,
      exit,
      trouble: [...troubleLines(daemon.lines), ...others.flatMap((o) => troubleLines(o.lines))],
      peers,
    };
  } finally {
    for (const d of [daemon, ...others]) if (d.child.exitCode === null) d.child.kill('SIGKILL');
    await tm.close();
  }
}

/**
 * 3. Throughput of one daemon process with `workers` threads: `tasks` tasks (noop, done) are
 * created first, then the daemon starts. Rate = tasks / (last run.finished − first
 * task.claimed), from the events' created_at (ms), so thread start-up is not counted; the wall
 * time from spawn to all completed (polled every 20 ms) is reported besides.
 */
export async function benchThroughput(path, { tasks, workers }) {
  const { tm } = open(path);
  const card = {
    goal: 'loop benchmark: throughput',
    planner: 'scripted',
    allowed_tools: ['noop'],
    budget: { max_steps: 10 },
    acceptance: ACCEPT,
    script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
  };
  for (let from = 0; from < tasks; from += 1000) {
    const batch = [];
    for (let i = from; i < Math.min(tasks, from + 1000); i++) batch.push({ title: `throughput ${i}`, card });
    await tm.createTasks(batch, OPERATOR);
  }
  await tm.close();
  const db = new Database(path, { readonly: true });
  const daemon = await startDaemonProcess(path, workers);
  try {
    await waitFor(() => {
      const c = stateCounts(db);
      if ((c.failed ?? 0) + (c.cancelled ?? 0) > 0) throw new Error(`throughput: tasks ended badly: ${JSON.stringify(c)}`);
      return (c.completed ?? 0) >= tasks || undefined;
    }, 300_000, `${tasks} tasks to complete with ${workers} workers`, 20);
    const doneAt = Date.now();
    const first = db.prepare("SELECT min(created_at) AS t FROM task_events WHERE type = 'task.claimed'").get().t;
    const last = db.prepare("SELECT max(created_at) AS t FROM task_events WHERE type = 'run.finished'").get().t;
    const seconds = (last - first) / 1000;
    const multiRun = db.prepare('SELECT count(*) AS n FROM (SELECT task_id FROM runs GROUP BY task_id HAVING count(*) <> 1)').get().n;
    const runsTotal = db.prepare('SELECT count(*) AS n FROM runs').get().n;
    const txPerTask = db.prepare('SELECT count(*) AS n FROM task_events').get().n / tasks;
    const cpuMsPerTask = (cpuSecondsOf(daemon.child.pid) * 1000) / tasks; // start-up included
    const exit = await daemon.terminate();
    return {
      tasks,
      workers,
      seconds,
      perSec: tasks / seconds,
      wallSeconds: (doneAt - daemon.startedAt) / 1000,
      states: stateCounts(db),
      runsOk: multiRun === 0 && runsTotal === tasks,
      eventsPerTask: txPerTask,
      cpuMsPerTask,
      exit,
      trouble: troubleLines(daemon.lines),
    };
  } finally {
    if (daemon.child.exitCode === null) daemon.child.kill('SIGKILL');
    db.close();
  }
}

/**
 * 4. Recovery. Daemon A (2 workers) holds two runs in flight (each waits 60 s in the built-in
 * `wait` tool); daemon B starts; A is killed with SIGKILL. Latency = each task's `run.resumed`
 * created_at − Date.now() just before the kill. Then `taskloop stop --all`: every task must end
 * cancelled, with one run (one run.started, at least one run.resumed). B gets SIGTERM.
 */
export async function benchRecovery(path, { round, waitMs = 60_000 }) {
  const { tm } = open(path);
  const db = tm.store.db;
  const daemonA = await startDaemonProcess(path, 2);
  let daemonB;
  try {
    const card = {
      goal: 'loop benchmark: recovery',
      planner: 'scripted',
      allowed_tools: ['wait'],
      budget: { max_steps: 10 },
      acceptance: ACCEPT,
      script: [{ action: 'tool', tool: 'wait', args: { ms: waitMs } }, { action: 'done' }],
    };
    const ids = [];
    for (let i = 0; i < 2; i++) ids.push((await tm.createTask({ title: `recovery ${round}.${i + 1}`, card }, OPERATOR)).task.id);
    const waiting = db.prepare(
      "SELECT count(*) AS n FROM steps s JOIN runs r ON r.id = s.run_id WHERE s.kind = 'action' AND s.tool = 'wait' AND s.status = 'started'",
    );
    await waitFor(() => waiting.get().n === ids.length || undefined, 20_000, 'daemon A to hold both runs in its wait step');
    daemonB = await startDaemonProcess(path, 2);
    await sleep(300); // B settles (first dead-daemon check, idle workers)
    const killedAt = Date.now();
    daemonA.child.kill('SIGKILL');
    const eventsOf = db.prepare('SELECT id, type, data, created_at FROM task_events WHERE task_id = ? ORDER BY id');
    const resumedOf = (id) => eventsOf.all(id).find((e) => e.type === 'run.resumed');
    await waitFor(() => ids.every((id) => resumedOf(id) !== undefined) || undefined, 20_000, 'daemon B to resume both runs', 5);
    const perTask = ids.map((id) => {
      const events = eventsOf.all(id);
      const resumed = resumedOf(id);
      const reclaimed = events.find((e) => e.type === 'task.stale_reclaimed');
      const reason = reclaimed === undefined ? null : JSON.parse(reclaimed.data).reason ?? null;
      return {
        id,
        ms: resumed.created_at - killedAt,
        reclaimMs: reclaimed === undefined ? null : reclaimed.created_at - killedAt,
        reclaimedFirst: reclaimed !== undefined && reclaimed.id < resumed.id && /is gone/.test(String(reason)),
        reason,
      };
    });
    const killed = await daemonA.exited;
    const stop = cli(path, ['stop', '--all']);
    if (stop.code !== 0) throw new Error(`taskloop stop --all exited ${stop.code}: ${stop.stderr}`);
    const states = () => ids.map((id) => db.prepare('SELECT state FROM tasks WHERE id = ?').get(id).state);
    await waitFor(() => states().every((s) => s === 'cancelled') || undefined, 20_000, `both tasks to be cancelled (now ${states()})`);
    const count = (id, type) => db.prepare('SELECT count(*) AS n FROM task_events WHERE task_id = ? AND type = ?').get(id, type).n;
    const checks = ids.map((id) => ({
      id,
      state: db.prepare('SELECT state FROM tasks WHERE id = ?').get(id).state,
      runs: db.prepare('SELECT count(*) AS n FROM runs WHERE task_id = ?').get(id).n,
      started: count(id, 'run.started'),
      resumed: count(id, 'run.resumed'),
      waitSteps: db.prepare("SELECT count(*) AS n FROM steps s JOIN runs r ON r.id = s.run_id WHERE r.task_id = ? AND s.tool = 'wait'").get(id).n,
    }));
    const exitB = await daemonB.terminate();
    return {
      round,
      perTask,
      maxMs: Math.max(...perTask.map((t) => t.ms)),
      checks,
      ok: checks.every((c) => c.state === 'cancelled' && c.runs === 1 && c.started === 1 && c.resumed >= 1) && perTask.every((t) => t.reclaimedFirst),
      stopOut: stop.stdout,
      killed,
      exitB,
      trouble: troubleLines(daemonB.lines),
    };
  } finally {
    for (const d of [daemonA, daemonB]) if (d !== undefined && d.child.exitCode === null) d.child.kill('SIGKILL');
    await tm.close();
  }
}
