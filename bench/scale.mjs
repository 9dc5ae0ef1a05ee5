/**
 * The daemon-at-scale benchmark (issue 12), in one run on one machine. `npm run bench:scale`.
 *
 * 1. In flight: BENCH_INFLIGHT (1000) tasks, each waiting BENCH_INFLIGHT_MS (5000) in the
 *    built-in `wait`, in one daemon with 2 threads and --concurrency BENCH_INFLIGHT: wall time
 *    from the daemon's start line to all completed, and the daemon's peak RSS (VmHWM).
 * 2. Drain of one-tool tasks (echo, then done): the library drain (claimTask + transitionTask
 *    in this process, no loop), one daemon (BENCH_DRAIN_WORKERS threads, default 2; default
 *    concurrency), two daemon processes; ratios in the same run. Three waves, created
 *    together and told apart by priority (claimed in this order): the cold wave, BENCH_DRAIN
 *    (4000) tasks, the first a fresh process runs; a warm-up, BENCH_DRAIN_WARMUP (12000) more
 *    per process; the warm wave, BENCH_DRAIN_WARM (12000: a wave of 4,000 lasts ~0.7 s in a
 *    daemon, short enough for a neighbour's burst to move it by 10%). Rate of a wave = its tasks / (its last
 *    task.completed − its first task.claimed), from the events. Why the warm wave: a fresh
 *    daemon spends its first seconds compiling its hot paths with V8's optimizing compiler,
 *    once per worker thread (measured: ~2.7 s of CPU per thread over its first ~6,000 tasks,
 *    about 45% of a 2-thread daemon's CPU in the cold wave; under 0.1 s in the warm wave), so
 *    the cold wave measures V8's warm-up and the warm wave what a running daemon drains.
 * Also two daemons of one thread each (d2x1): as many threads as one daemon of two, so the process
 * boundary's cost without more threads than cores on a two-core machine; and one daemon of one
 * thread (d1x1), to compare two daemons with one at the same threads per daemon.
 * The drains run BENCH_SCALE_ROUNDS (3) times, interleaved, each ratio taken within a round and
 * its median reported. Fresh files per scenario in a temp folder (removed at the end).
 * BENCH_SCALE_ONLY (a comma list of inflight, lib, d1, d2, d2x1, d1x1) runs only those parts, one round
 * unless BENCH_SCALE_ROUNDS says otherwise, and prints their raw figures as JSON. BENCH_SCALE_PIN=1
 * gives each daemon of a drain a CPU of its own (see PIN).
 */
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { createSqliteStore, createTaskManager } from '../dist/engine/index.js';
import { completionCounter } from './lib/completions.mjs';
import { killAll, startDaemonProcess, troubleLines, waitFor } from './lib/loop-daemon.mjs';
import { cpuSecondsOf, createScratch, fmtInt, fmtNum, log, table } from './lib/util.mjs';

const env = (name, fallback) => Number(process.env[name] ?? fallback);
const INFLIGHT = env('BENCH_INFLIGHT', 1000);
const INFLIGHT_MS = env('BENCH_INFLIGHT_MS', 5000);
const DRAIN = env('BENCH_DRAIN', 4000);
// Worker threads of each daemon in the drain scenarios.
const THREADS = env('BENCH_DRAIN_WORKERS', 2);
// BENCH_SCALE_PIN=1: daemon i of a drain runs on CPU i alone (taskset), so each daemon has a
// core of its own: two daemons on two cores against one daemon on one, whatever its threads
// (what a second daemon on a machine of its own would add, on a machine with few cores).
const PIN = process.env.BENCH_SCALE_PIN === '1';
const OPERATOR = { id: 'operator', role: 'operator' };
const ACCEPT = { checks: [{ id: 'tools_ok', tools_subset: true }] };

const scratch = createScratch();
const counts = (db) => Object.fromEntries(db.prepare('SELECT state, count(*) AS n FROM tasks GROUP BY state').all().map((r) => [r.state, r.n]));
const peakRssMb = (pid) => {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? NaN : Number(m[1]) / 1024;
};

async function createMany(path, n, card, priority = 0) {
  const tm = createTaskManager({ store: createSqliteStore({ path }) });
  for (let i = 0; i < n; i += 1000) {
    await tm.createTasks(Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ title: `t${i + j}`, card, priority })), OPERATOR);
  }
  await tm.close();
}

// The drains' waves, told apart by priority: cold, then the warm-up, then warm.
const WARMUP = env('BENCH_DRAIN_WARMUP', 12000);
const WARM = env('BENCH_DRAIN_WARM', 12000);
const WAVES = { cold: 2, warmup: 1, warm: 0 };
async function createWaves(path, card, processes) {
  await createMany(path, DRAIN, card, WAVES.cold);
  await createMany(path, WARMUP * processes, card, WAVES.warmup);
  await createMany(path, WARM, card, WAVES.warm);
}

function rateFromEvents(path, n, priority) {
  const db = new Database(path, { readonly: true });
  const ofWave = `FROM task_events e JOIN tasks t ON t.id = e.task_id WHERE t.priority = ${priority}`;
  try {
    const first = db.prepare(`SELECT min(e.created_at) AS t ${ofWave} AND e.type = 'task.claimed'`).get().t;
    const last = db.prepare(`SELECT max(e.created_at) AS t ${ofWave} AND e.data LIKE '%"to":"completed"%'`).get().t;
    const byAssignee = db.prepare(`SELECT assignee, count(*) AS n FROM tasks WHERE priority = ${priority} GROUP BY assignee`).all().map((r) => r.n);
    const events = db.prepare(`SELECT count(*) AS n ${ofWave}`).get().n / n;
    return { seconds: (last - first) / 1000, perSec: n / ((last - first) / 1000), byAssignee, eventsPerTask: events };
  } finally {
    db.close();
  }
}

async function inFlight() {
  const path = scratch.file('inflight');
  const card = { goal: 'in flight', planner: 'scripted', allowed_tools: ['wait'], budget: { max_steps: 5 }, acceptance: ACCEPT, script: [{ action: 'tool', tool: 'wait', args: { ms: INFLIGHT_MS } }, { action: 'done' }] };
  await createMany(path, INFLIGHT, card);
  const db = new Database(path, { readonly: true });
  const d = await startDaemonProcess(path, 2, ['--concurrency', String(INFLIGHT)]);
  const completed = completionCounter(db);
  try {
    await waitFor(() => completed() >= INFLIGHT || undefined, 120_000, 'all in-flight tasks', 20);
    const wall = (Date.now() - d.startedAt) / 1000;
    const rss = peakRssMb(d.child.pid);
    await d.terminate();
    return { wall, rss, states: counts(db), trouble: troubleLines(d.lines) };
  } finally {
    db.close();
  }
}

async function libraryDrain() {
  const path = scratch.file('drain-lib');
  await createWaves(path, {}, 1);
  const tm = createTaskManager({ store: createSqliteStore({ path }) });
  const actor = { id: 'lib', role: 'agent' };
  for (;;) {
    const c = await tm.claimTask({ agent: 'lib', start: true });
    if (c === null) break;
    await tm.transitionTask({ taskId: c.id, to: 'review', actor, claimToken: c.claimToken, then: [{ to: 'completed', actor: { id: 'acceptance', role: 'system' } }] });
  }
  await tm.close();
  return { cold: rateFromEvents(path, DRAIN, WAVES.cold), warm: rateFromEvents(path, WARM, WAVES.warm) };
}

async function daemonDrain(daemons, threads = THREADS) {
  const path = scratch.file(`drain-d${daemons}x${threads}`);
  const card = { goal: 'drain', planner: 'scripted', allowed_tools: ['echo'], budget: { max_steps: 5 }, acceptance: ACCEPT, script: [{ action: 'tool', tool: 'echo', args: { text: 'x' } }, { action: 'done' }] };
  await createWaves(path, card, daemons);
  const db = new Database(path, { readonly: true });
  const ds = [];
  try {
    for (let i = 0; i < daemons; i++) ds.push(await startDaemonProcess(path, threads, [], {}, PIN ? String(i % availableParallelism()) : undefined));
    // The daemons' CPU per task of each wave, from their start lines (their start-up left
    // out) to the wave's last completion; the waves overlap by the runs in flight.
    const cpu = () => ds.reduce((sum, d) => sum + cpuSecondsOf(d.child.pid), 0);
    // Polled from the event log's tail: a count by state would take CPU from the daemons.
    const completed = completionCounter(db);
    const cpu0 = cpu();
    await waitFor(() => completed() >= DRAIN || undefined, 300_000, 'the cold wave', 5);
    const cpu1 = cpu();
    await waitFor(() => completed() >= DRAIN + WARMUP * daemons || undefined, 300_000, 'the warm-up', 5);
    const cpu2 = cpu();
    await waitFor(() => completed() >= DRAIN + WARMUP * daemons + WARM || undefined, 300_000, 'the warm wave', 20);
    const cpu3 = cpu();
    for (const d of ds) await d.terminate();
    return {
      cold: { ...rateFromEvents(path, DRAIN, WAVES.cold), cpuMsPerTask: ((cpu1 - cpu0) * 1000) / DRAIN },
      warm: { ...rateFromEvents(path, WARM, WAVES.warm), cpuMsPerTask: ((cpu3 - cpu2) * 1000) / WARM },
      trouble: ds.flatMap((d) => troubleLines(d.lines)),
    };
  } finally {
    db.close();
    killAll();
  }
}

const load0 = loadavg()[0];
// BENCH_SCALE_ONLY: a comma list of inflight, lib, d1, d2, d2x1, d1x1 (all by default); prints the parts' JSON.
const ONLY = process.env.BENCH_SCALE_ONLY?.split(',');
// BENCH_SCALE_ROUNDS (3): the drains run this many times, interleaved (lib, d1, d2, d2x1, then
// again), and each ratio is taken within a round, then its median reported: on a shared
// machine one drain's rate moves by 10-30% from one run to the next (BENCHMARKS.md, session 25).
const ROUNDS = env('BENCH_SCALE_ROUNDS', ONLY === undefined ? 3 : 1);
// d2x1: two daemons of one thread each, as many threads as one daemon of two: what the process
// boundary costs without more threads than this machine's two cores. d1x1: one daemon of one
// thread, so that two daemons are also compared with one at the same threads per daemon (a
// second daemon brings its own thread, as it would bring its own cores on a bigger machine).
const drains = { lib: libraryDrain, d1: () => daemonDrain(1), d2: () => daemonDrain(2), d2x1: () => daemonDrain(2, 1), d1x1: () => daemonDrain(1, 1) };
const wanted = (name) => ONLY === undefined || ONLY.includes(name);
const r = { rounds: [] };
try {
  if (wanted('inflight')) {
    log('inflight …');
    r.inflight = await inFlight();
  }
  for (let round = 1; round <= ROUNDS; round++) {
    const one = {};
    for (const [name, run] of Object.entries(drains)) {
      if (!wanted(name)) continue;
      log(`${name}, round ${round} of ${ROUNDS} …`);
      one[name] = await run();
    }
    r.rounds.push(one);
  }
} finally {
  scratch.remove();
}
if (ONLY !== undefined) {
  // One round: its parts at the top level, as before rounds existed.
  console.log(JSON.stringify(ROUNDS === 1 ? { ...(r.inflight && { inflight: r.inflight }), ...r.rounds[0] } : r));
  process.exit(0);
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const out = [];
out.push(`taskloop scale benchmark — ${availableParallelism()} CPUs, node ${process.version}, load average ${load0.toFixed(2)} → ${loadavg()[0].toFixed(2)}`);
out.push('');
out.push(`1 in flight: ${fmtInt(INFLIGHT)} runs waiting ${INFLIGHT_MS} ms each, one daemon, 2 threads: all done in ${fmtNum(r.inflight.wall, 2)} s, peak RSS ${fmtNum(r.inflight.rss, 0)} MB; states ${JSON.stringify(r.inflight.states)}; trouble lines ${r.inflight.trouble.length}`);
out.push('');
const names = { lib: 'library (claim + transition)', d1: `one daemon, ${THREADS} thread(s) (echo card)`, d2: `two daemons, ${THREADS} thread(s) each`, d2x1: 'two daemons, 1 thread each', d1x1: 'one daemon, 1 thread' };
const row = (name, wave, x) => [name, wave, fmtNum(x.seconds, 2), fmtInt(x.perSec), fmtNum(x.eventsPerTask, 1), x.cpuMsPerTask === undefined ? '' : fmtNum(x.cpuMsPerTask, 3), x.byAssignee.join(' / ')];
const rows = [];
r.rounds.forEach((one, i) => {
  for (const [key, name] of Object.entries(names)) rows.push(row(`${name}, round ${i + 1}`, 'cold', one[key].cold), row('', 'warm', one[key].warm));
});
out.push(table([`2 drain: cold wave ${fmtInt(DRAIN)}, warm wave ${fmtInt(WARM)} after ${fmtInt(WARMUP)} more per process`, 'wave', 'seconds', 'tasks/s', 'events/task', 'daemon CPU ms/task', 'tasks per claimer'], rows));
out.push('');
const ratios = (a, b, wave) => r.rounds.map((one) => one[a][wave].perSec / one[b][wave].perSec);
const ratioRow = (label, a, b, target) => {
  const cold = ratios(a, b, 'cold');
  const warm = ratios(a, b, 'warm');
  return [label, fmtNum(median(cold), 2), fmtNum(median(warm), 2), warm.map((x) => fmtNum(x, 2)).join(' / '), target];
};
out.push(table(['ratio (median of the rounds)', 'cold wave', 'warm wave', 'warm, each round', 'target'], [
  ratioRow('one daemon / library', 'd1', 'lib', '>= 0.3'),
  ratioRow('two daemons / one daemon', 'd2', 'd1', '>= 1.0'),
  ratioRow(`two daemons of 1 thread / one of ${THREADS}`, 'd2x1', 'd1', ''),
  ratioRow('two daemons / one daemon, 1 thread each', 'd2x1', 'd1x1', ''),
]));
out.push(`trouble lines: ${r.rounds.flatMap((one) => ['d1', 'd2', 'd2x1', 'd1x1'].flatMap((k) => one[k].trouble)).length}`);
console.log(out.join('\n'));
