/**
 * Scenario 1 of the loop benchmark: the engine's overhead per persisted loop iteration.
 * runTaskLoop runs in this process on a real SQLite file, with the scripted planner and the
 * built-in `noop` tool; an iteration is the time between two consecutive `step_finished`
 * events of kind `action` (decide step + action step: 4 fenced writes with their events,
 * plus the breaker's two transactions). The floor is a bare better-sqlite3 loop doing one
 * BEGIN IMMEDIATE transaction per step (one steps-like row and one event row).
 */
import Database from 'better-sqlite3';
import { createSqliteRunStore, createSqliteStore, createTaskManager } from '../../dist/engine/index.js';
import { builtInTools } from '../../dist/tools/builtin.js';
import { createToolRegistry } from '../../dist/tools/registry.js';
import { runTaskLoop } from '../../dist/workers/loop.js';
import { createScriptedPlanner } from '../../dist/workers/planners/scripted.js';
import { nowNs, percentile } from './util.mjs';

export const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
const POLICY = Object.freeze({ threshold: 3, cooldownMs: 300_000, probeTimeoutMs: 60_000 });

/**
 * The card of one run: `steps` echo calls (a read that returns its text), then done. Each
 * call gets its own text: with identical arguments the loop's repeat detector ends the run
 * as `blocked / loop_detected` at the third call (its limit is at most 100, see
 * src/workers/detectors.ts). (Until issue 10 this was noop with an argument noop's schema
 * strips; the step now records the arguments the gate admitted, so those were identical.)
 */
export function stepsCard(steps) {
  const script = Array.from({ length: steps }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: String(i) } }));
  script.push({ action: 'done' });
  return {
    goal: 'loop benchmark: engine overhead per step',
    planner: 'scripted',
    allowed_tools: ['echo'],
    budget: { max_steps: steps + 10 },
    acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
    script,
  };
}

/** p50/p99 of iterations lo..hi (1-based action numbers) over all runs. */
function windowStats(perRun, lo, hi) {
  const xs = perRun.flatMap((its) => its.slice(lo - 1, hi)).filter((x) => x !== undefined).sort((a, b) => a - b);
  return { n: xs.length, p50: percentile(xs, 50), p99: percentile(xs, 99), max: xs[xs.length - 1], over1ms: xs.filter((x) => x > 1000).length };
}

/**
 * Runs `runs` tasks of `steps` noop iterations each through runTaskLoop, one after another on
 * one file. `its[k-1]` of a run is the µs from action k-1's step_finished to action k's (k ≥ 2);
 * for k = 1 the start is the run_started event. `instrument` wraps the store's write to count
 * transactions and the time spent in them (a separate, diagnostic pass: it adds its own cost).
 */
async function runLoops(path, runs, steps, windows, instrument = false, warmup = 0) {
  const store = createSqliteStore({ path });
  const counter = { writes: 0, writeNs: 0n, byKind: new Map() };
  if (instrument) {
    const write = store.write;
    store.write = (what, fn) => {
      counter.writes++;
      const t0 = nowNs();
      const p = write(what, fn);
      const dt = nowNs() - t0;
      counter.writeNs += dt;
      const k = counter.byKind.get(what) ?? { n: 0, ns: 0n };
      k.n++;
      k.ns += dt;
      counter.byKind.set(what, k);
      return p;
    };
  }
  const tm = createTaskManager({ store });
  const runStore = createSqliteRunStore(store);
  const tools = createToolRegistry(builtInTools());
  const card = stepsCard(steps);
  const perRun = [];
  let writesInWindow = 0;
  let writeNsInWindow = 0n;
  let itsInWindow = 0;
  try {
    for (let r = -warmup; r < runs; r++) {
      await tm.createTask({ title: r < 0 ? `loop steps warm-up` : `loop steps ${r + 1}`, card }, OPERATOR);
      const claim = await tm.claimTask({ agent: 'bench', start: true });
      const gen = runTaskLoop({
        task: claim,
        fence: { taskId: claim.id, claimToken: claim.claimToken, agent: 'bench' },
        runs: runStore,
        tools,
        planner: (c, made) => createScriptedPlanner(c.script ?? [], made),
        services: {},
        breakerPolicy: POLICY,
        watch: (fn) => store.watch(fn),
        now: Date.now,
      });
      const its = [];
      let last = 0n;
      let mark = { writes: 0, ns: 0n };
      for (;;) {
        const next = await gen.next();
        if (next.done === true) {
          const { phase, stopReason } = next.value;
          if (phase !== 'completed') throw new Error(`loop steps run ${r + 1}: ${phase} (${stopReason}), expected completed`);
          break;
        }
        const e = next.value;
        if (e.type === 'run_started') last = nowNs();
        else if (e.type === 'step_finished' && e.step.kind === 'action') {
          const t = nowNs();
          its.push(Number(t - last) / 1000);
          last = t;
          const k = its.length;
          if (windows.some(([lo, hi]) => k >= lo && k <= hi)) {
            writesInWindow += counter.writes - mark.writes;
            writeNsInWindow += counter.writeNs - mark.ns;
            itsInWindow++;
          }
          mark = { writes: counter.writes, ns: counter.writeNs };
        }
      }
      if (its.length !== steps) throw new Error(`loop steps run ${r + 1}: ${its.length} actions, expected ${steps}`);
      if (r < 0) {
        // A warm-up run: nothing it did is counted.
        counter.writes = 0;
        counter.writeNs = 0n;
        counter.byKind.clear();
        writesInWindow = 0;
        writeNsInWindow = 0n;
        itsInWindow = 0;
        continue;
      }
      perRun.push(its);
    }
    const stepRows = store.db.prepare('SELECT count(*) AS n FROM steps').get().n;
    return {
      perRun,
      stepRows,
      byKind: [...counter.byKind].map(([what, k]) => ({ what, n: k.n, meanUs: Number(k.ns) / 1000 / k.n })),
      writesPerIt: writesInWindow / Math.max(1, itsInWindow),
      writeUsPerIt: Number(writeNsInWindow) / 1000 / Math.max(1, itsInWindow),
    };
  } finally {
    await tm.close();
  }
}

/**
 * 1a. The engine: `warmup` untimed runs first (JIT), then the timed runs on the same file,
 * then an instrumented pass on its own file (transactions per iteration, time per write kind).
 */
export async function benchLoopSteps(path, diagPath, smallPath, { runs, steps, windows, warmup = 2, smallSteps = 60 }) {
  const timed = await runLoops(path, runs, steps, windows, false, warmup);
  const diag = await runLoops(diagPath, Math.min(runs, 3), steps, windows, true, 1);
  // The same iterations with a card of `smallSteps` decisions (~3 KB instead of ~25 KB).
  const small = await runLoops(smallPath, runs, smallSteps, [windows[0]], false, warmup);
  return {
    small: { steps: smallSteps, cardBytes: JSON.stringify(stepsCard(smallSteps)).length, ...windowStats(small.perRun, windows[0][0], windows[0][1]) },
    cardBytes: JSON.stringify(stepsCard(steps)).length,
    runs,
    steps,
    warmup,
    byKind: diag.byKind,
    stepRows: timed.stepRows,
    windows: windows.map(([lo, hi]) => ({ lo, hi, ...windowStats(timed.perRun, lo, hi) })),
    all: windowStats(timed.perRun, 2, steps),
    writesPerIt: diag.writesPerIt,
    writeUsPerIt: diag.writeUsPerIt,
    diagWindows: windows.map(([lo, hi]) => ({ lo, hi, ...windowStats(diag.perRun, lo, hi) })),
  };
}

/**
 * 1b. The floor: per step one BEGIN IMMEDIATE transaction inserting a steps-like row and an
 * event row (WAL, synchronous=NORMAL, JSON text like the engine's). An iteration is two steps
 * (decide + action), timed like the engine's: between consecutive action steps.
 */
export function benchStepFloor(path, { runs, steps, windows }) {
  const db = new Database(path);
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('busy_timeout = 5000');
    db.exec(`
      CREATE TABLE steps (
        id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
        status TEXT NOT NULL, tool TEXT, args TEXT, result TEXT, started_at INTEGER NOT NULL,
        UNIQUE (run_id, seq)
      );
      CREATE TABLE events (
        id INTEGER PRIMARY KEY, task_id INTEGER, type TEXT NOT NULL, data TEXT NOT NULL, created_at INTEGER NOT NULL
      );
    `);
    const insertStep = db.prepare(
      "INSERT INTO steps (run_id, seq, kind, status, tool, args, result, started_at) VALUES (?, ?, ?, 'ok', ?, ?, ?, ?)",
    );
    const insertEvent = db.prepare('INSERT INTO events (task_id, type, data, created_at) VALUES (?, ?, ?, ?)');
    const step = db.transaction((run, seq, kind, tool, args, result) => {
      const now = Date.now();
      insertStep.run(run, seq, kind, tool, args, result, now);
      insertEvent.run(run, 'run.step_finished', JSON.stringify({ run_id: run, seq, kind, tool, status: 'ok' }), now);
    });
    const perRun = [];
    for (let run = 0; run <= runs; run++) { // run 0 warms up and is not counted
      const its = [];
      let last = nowNs();
      let seq = 0;
      for (let i = 0; i < steps; i++) {
        step.immediate(run, ++seq, 'decide', null, null, JSON.stringify({ action: 'tool', tool: 'noop', args: { i } }));
        step.immediate(run, ++seq, 'action', 'noop', JSON.stringify({ i }), '{"ok":true}');
        const t = nowNs();
        its.push(Number(t - last) / 1000);
        last = t;
      }
      if (run > 0) perRun.push(its);
    }
    return { windows: windows.map(([lo, hi]) => ({ lo, hi, ...windowStats(perRun, lo, hi) })), all: windowStats(perRun, 2, steps) };
  } finally {
    db.close();
  }
}
