/**
 * The queue benchmark: taskloop against a bare better-sqlite3 floor and plainjob, on one
 * machine in one run. Run with `npm run bench:queue` (builds dist/ first).
 *
 * Every scenario gets a fresh database file in a temp folder (removed at the end), WAL and
 * synchronous=NORMAL. Knobs (environment): BENCH_N (tasks per drain, default 20000),
 * BENCH_PROCS (4), BENCH_SAMPLES (timed claims, 2000), BENCH_WARMUP (200),
 * BENCH_SMALL (1000) and BENCH_BIG (1000000) pending tasks for the claim latency.
 * Results go to stdout, progress to stderr.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { benchBare, benchPlainjob } from './lib/baselines.mjs';
import { benchClaimLatency, benchCreate, benchLifecycle, benchLifecycleProcs } from './lib/taskloop.mjs';
import { createScratch, fmtInt, fmtNum, log, nowNs, seconds, table } from './lib/util.mjs';

const env = (name, fallback) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const N = env('BENCH_N', 20_000);
const PROCS = env('BENCH_PROCS', 4);
const SAMPLES = env('BENCH_SAMPLES', 2_000);
const WARMUP = env('BENCH_WARMUP', 200);
const SMALL = env('BENCH_SMALL', 1_000);
const BIG = env('BENCH_BIG', 1_000_000);

function cpuModel() {
  try {
    return /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

const scratch = createScratch();
const started = nowNs();
const r = {};

/** Runs one scenario on its own fresh file and removes the file afterwards. */
async function scenario(key, label, fn) {
  const path = scratch.file(key);
  log(`${label} …`);
  const t0 = nowNs();
  try {
    r[key] = await fn(path);
  } finally {
    scratch.drop(path);
  }
  log(`${label}: done in ${seconds(t0, nowNs()).toFixed(1)} s`);
}

try {
  await scenario('create', 'taskloop createTask', (p) => benchCreate(p, N));
  await scenario('life1', 'taskloop lifecycle, 1 process', (p) => benchLifecycle(p, N));
  await scenario('lifeN', `taskloop lifecycle, ${PROCS} processes`, (p) => benchLifecycleProcs(p, N, PROCS));
  await scenario('bare', 'bare better-sqlite3 floor', (p) => benchBare(p, N));
  await scenario('plainjob', 'plainjob 0.0.14', (p) => benchPlainjob(p, N));
  await scenario('latSmall', `claim latency, ${fmtInt(SMALL)} pending`, (p) => benchClaimLatency(p, SMALL, SAMPLES, WARMUP));
  await scenario('latBig', `claim latency, ${fmtInt(BIG)} pending`, (p) => benchClaimLatency(p, BIG, SAMPLES, WARMUP));
} finally {
  scratch.remove();
}

const out = [];
out.push('taskloop queue benchmark');
out.push(
  `machine: ${availableParallelism()} CPUs (${cpuModel()}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, node ${process.version}, ${process.platform}`,
);
out.push(`N = ${fmtInt(N)} per drain, WAL, synchronous=NORMAL, one fresh file per scenario in ${scratch.dir}`);
out.push('');

const row = (name, x, what) => [name, fmtInt(x.ops), fmtNum(x.seconds, 2), fmtInt(x.perSec), what];
out.push(
  table(
    ['scenario', 'ops', 'seconds', 'ops/s', 'one op is'],
    [
      row('1 taskloop createTask', r.create, 'createTask (1 tx, 1 event)'),
      row('2 taskloop lifecycle, 1 proc', r.life1, 'claim+start (1 tx) + review→completed (1 tx), 4 events'),
      row(`3 taskloop lifecycle, ${PROCS} procs`, r.lifeN, `same, ${PROCS} forked processes on one file`),
      row('5 bare better-sqlite3 floor', r.bare, 'claim (1 tx) + complete (1 UPDATE)'),
      row('6 plainjob 0.0.14', r.plainjob, 'getAndMarkJobAsProcessing + markJobAsDone'),
    ],
  ),
);
out.push('');
out.push(`${PROCS}-process drain per worker: ${r.lifeN.perWorker.join(', ')}`);
out.push(`checks (1 proc):  ${r.life1.check}`);
out.push(`checks (${PROCS} procs): ${r.lifeN.check}`);
out.push('');

const lat = (x) => [`${fmtInt(x.backlog)} pending`, fmtInt(x.samples), fmtNum(x.p50, 1), fmtNum(x.p99, 1), fmtNum(x.max, 1)];
out.push('4 claimTask({agent}) latency, µs (each claim followed by an untimed createTask, so the backlog stays constant)');
out.push(table(['backlog', 'claims', 'p50 µs', 'p99 µs', 'max µs'], [lat(r.latSmall), lat(r.latBig)]));
out.push('');

const ratio = (name, value, target, ok) => [name, fmtNum(value, 2), target, target === '' ? '' : ok ? 'met' : 'MISSED'];
const lifeVsPlain = r.life1.perSec / r.plainjob.perSec;
const p99Ratio = r.latBig.p99 / r.latSmall.p99;
out.push(
  table(
    ['ratio', 'value', 'target', 'verdict'],
    [
      ratio('taskloop lifecycle 1 proc / plainjob', lifeVsPlain, '>= 1.0', lifeVsPlain >= 1),
      ratio('taskloop lifecycle 1 proc / bare floor', r.life1.perSec / r.bare.perSec, '', true),
      ratio(`taskloop lifecycle ${PROCS} procs / 1 proc`, r.lifeN.perSec / r.life1.perSec, '', true),
      ratio(`claim p99 @${fmtInt(BIG)} / p99 @${fmtInt(SMALL)}`, p99Ratio, '<= 1.5', p99Ratio <= 1.5),
    ],
  ),
);
out.push('');
out.push(`total wall time ${seconds(started, nowNs()).toFixed(0)} s`);
console.log(out.join('\n'));
