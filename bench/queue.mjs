/**
 * The queue benchmark: taskloop against a bare better-sqlite3 floor and plainjob, on one
 * machine in one run. Run with `npm run bench:queue` (builds dist/ first).
 *
 * Every scenario gets a fresh database file in a temp folder (removed at the end), WAL and
 * synchronous=NORMAL. Knobs (environment): BENCH_N (tasks per drain, default 20000),
 * BENCH_PROCS (4), BENCH_SAMPLES (timed claims per backlog, 10000), BENCH_WARMUP (500),
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
const SAMPLES = env('BENCH_SAMPLES', 10_000);
const WARMUP = env('BENCH_WARMUP', 500);
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

/** Runs one scenario on its own fresh file(s) and removes them afterwards. */
async function scenario(key, label, fn, files = 1) {
  const paths = Array.from({ length: files }, (_, i) => scratch.file(files === 1 ? key : `${key}-${i + 1}`));
  log(`${label} …`);
  const t0 = nowNs();
  try {
    r[key] = await fn(...paths);
  } finally {
    for (const path of paths) scratch.drop(path);
  }
  log(`${label}: done in ${seconds(t0, nowNs()).toFixed(1)} s`);
}

try {
  await scenario('create', 'taskloop createTask', (p) => benchCreate(p, N));
  await scenario('life1', 'taskloop lifecycle, 1 process', (p) => benchLifecycle(p, N));
  await scenario('lifeN', `taskloop lifecycle, ${PROCS} processes`, (p) => benchLifecycleProcs(p, N, PROCS));
  await scenario('bare', 'bare better-sqlite3 floor', (p) => benchBare(p, N));
  await scenario('plainjob', 'plainjob 0.0.14', (p) => benchPlainjob(p, N));
  const latency = `claim latency, ${fmtInt(SMALL)} and ${fmtInt(BIG)} pending, interleaved`;
  await scenario('lat', latency, (a, b) => benchClaimLatency([a, b], [SMALL, BIG], SAMPLES, WARMUP), 2);
} finally {
  scratch.remove();
}

const out = [];
out.push('taskloop queue benchmark');
out.push(
  `machine: ${availableParallelism()} CPUs (${cpuModel()}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, node ${process.version}, ${process.platform}`,
);
out.push(`N = ${fmtInt(N)} per drain, WAL, synchronous=NORMAL, one fresh file per scenario in ${scratch.dir} (removed)`);
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

const [small, big] = r.lat;
const lat = (x) => [`${fmtInt(x.backlog)} pending`, fmtInt(x.samples), ...[x.p50, x.p90, x.p99, x.p999, x.max].map((v) => fmtNum(v, 1)), `${fmtInt(x.over1ms)} (${fmtNum((100 * x.over1ms) / x.samples, 2)}%)`];
out.push('4 claimTask({agent}) latency in µs; the two backlogs are timed interleaved, and each claim is followed by');
out.push('  an untimed createTask so the backlog stays constant');
out.push(table(['backlog', 'claims', 'p50', 'p90', 'p99', 'p99.9', 'max', 'claims > 1 ms'], [lat(small), lat(big)]));
out.push('');

const ratio = (name, value, target, ok) => [name, fmtNum(value, 2), target, target === '' ? '' : ok ? 'met' : 'MISSED'];
const lifeVsPlain = r.life1.perSec / r.plainjob.perSec;
const p99Ratio = big.p99 / small.p99;
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
