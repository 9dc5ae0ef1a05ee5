/**
 * The library worker (`createWorker`) at several concurrencies, on one SQLite file per run.
 * `npm run bench:worker`. BENCH_N (4000) tasks without a card in the worker's queue; the
 * handler returns after one turn of the event loop; rate = tasks / (first claim → last
 * handler return), CPU = this process's user + system time over the same span, per task.
 * Concurrencies BENCH_C (1,4,32), each run BENCH_ROUNDS (2) times, alternated.
 *
 * Then idle workers: another process creates BENCH_N tasks on a queue no worker serves, with 0
 * and with BENCH_IDLE (4) idle worker processes on the same file (until session 14 each was
 * woken by every commit; now only by creates in its queue, and by the store's 50 ms poll):
 * the producer's creates per second, and the idle workers' CPU per create.
 */
import { fork } from 'node:child_process';
import { availableParallelism, loadavg } from 'node:os';
import { OPERATOR, openStore } from '../dist/index.js';
import { createWorker } from '../dist/workers/index.js';
import { cpuSecondsOf, createScratch, fmtInt, fmtNum, log, table } from './lib/util.mjs';

const N = Number(process.env.BENCH_N ?? 4000);
const CONCURRENCIES = (process.env.BENCH_C ?? '1,4,32').split(',').map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const scratch = createScratch();

async function drain(concurrency, round) {
  const store = await openStore({ path: scratch.file(`w${concurrency}-${round}`) });
  try {
    for (let i = 0; i < N; i += 1000) {
      await store.tm.createTasks(Array.from({ length: Math.min(1000, N - i) }, (_, j) => ({ title: `t${i + j}`, queue: 'bench' })), OPERATOR);
    }
    let done = 0;
    let finished;
    const all = new Promise((resolve) => (finished = resolve));
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const worker = await createWorker({
      store,
      queue: 'bench',
      agent: 'bench',
      concurrency,
      sweepMs: 0,
      handler: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        if (++done === N) finished();
        return { ok: true };
      },
    });
    await all;
    const ms = performance.now() - t0;
    const cpu = process.cpuUsage(c0);
    await worker.close(5000);
    return { perSec: (N / ms) * 1000, cpuMsPerTask: (cpu.user + cpu.system) / 1000 / N };
  } finally {
    await store.close();
  }
}

const IDLE = Number(process.env.BENCH_IDLE ?? 4);

async function withIdle(k, round) {
  const path = scratch.file(`idle${k}-${round}`);
  const store = await openStore({ path });
  const kids = [];
  try {
    await store.tm.createTask({ title: 'first' }, OPERATOR);
    for (let i = 0; i < k; i++) {
      const child = fork(new URL('./lib/idle-worker.mjs', import.meta.url), [path]);
      kids.push(child);
      await new Promise((resolve) => child.once('message', resolve));
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
    const cpu0 = kids.map((c) => cpuSecondsOf(c.pid));
    const t0 = performance.now();
    for (let i = 0; i < N; i++) await store.tm.createTask({ title: `t${i}`, queue: 'other' }, OPERATOR);
    const ms = performance.now() - t0;
    const idleCpu = kids.reduce((sum, c, i) => sum + cpuSecondsOf(c.pid) - cpu0[i], 0);
    return { perSec: (N / ms) * 1000, idleCpuMsPerCreate: (idleCpu * 1000) / N };
  } finally {
    for (const c of kids) {
      c.send('stop');
      await new Promise((resolve) => c.once('exit', resolve));
    }
    await store.close();
  }
}

const load0 = loadavg()[0];
const results = new Map(CONCURRENCIES.map((c) => [c, []]));
const idle = new Map([[0, []], [IDLE, []]]);
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const c of CONCURRENCIES) {
      log(`concurrency ${c}, round ${round} …`);
      results.get(c).push(await drain(c, round));
    }
  }
  for (let round = 1; round <= ROUNDS; round++) {
    for (const k of idle.keys()) {
      log(`${k} idle workers, round ${round} …`);
      idle.get(k).push(await withIdle(k, round));
    }
  }
} finally {
  scratch.remove();
}
console.log(`taskloop library worker benchmark — ${availableParallelism()} CPUs, node ${process.version}, load average ${load0.toFixed(2)} → ${loadavg()[0].toFixed(2)}`);
console.log(table(
  ['createWorker, ' + fmtInt(N) + ' tasks', 'tasks/s (each round)', 'CPU ms/task (each round)'],
  CONCURRENCIES.map((c) => [`concurrency ${c}`, results.get(c).map((r) => fmtInt(r.perSec)).join(', '), results.get(c).map((r) => fmtNum(r.cpuMsPerTask, 3)).join(', ')]),
));
console.log(table(
  [`creates on another queue, ${fmtInt(N)}`, 'creates/s (each round)', "idle workers' CPU ms per create"],
  [...idle].map(([k, rs]) => [`${k} idle worker processes`, rs.map((r) => fmtInt(r.perSec)).join(', '), rs.map((r) => fmtNum(r.idleCpuMsPerCreate, 3)).join(', ')]),
));
