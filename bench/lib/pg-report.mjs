/**
 * The results of the pg benchmark as text: the machine and server, round trips, the drains,
 * pickup and claim latency tables, and the ratios against issue 13's targets. Parts that
 * were not run (BENCH_ONLY) or did not finish (a failure) are left out.
 */
import { fmtInt, fmtNum, table } from './util.mjs';

const verdict = (ok) => (ok ? 'met' : 'MISSED');
const pair = (a, b) => `${fmtNum(a, 2)} / ${fmtNum(b, 2)}`;
const perFlush = (w) => fmtNum(w.syncMs / Math.max(1, w.syncs), 2);

function drains(r, { PROCS, LOOPS }, out, ratios) {
  const flushes = (x) => (x.wal === undefined ? ['n/a', 'n/a'] : [fmtNum(x.wal.syncs / x.ops, 2), perFlush(x.wal)]);
  const cpu = (x) => [x.cpu.serverMs === undefined ? 'n/a' : fmtNum(x.cpu.serverMs / x.ops, 2), fmtNum(x.cpu.clientMs / x.ops, 2)];
  const row = (name, x, what) => [name, fmtInt(x.ops), fmtNum(x.seconds, 2), fmtInt(x.perSec), ...flushes(x), ...cpu(x), what];
  const rows = [];
  for (const procs of [1, PROCS]) {
    const p = `${procs} proc${procs === 1 ? '' : 's'} × ${LOOPS}`;
    rows.push(row(`taskloop lifecycle, ${p}`, r[`taskloop:${procs}`], 'claim+start (1 tx) + review→completed (1 tx), 4 events'));
    rows.push(row(`bare pg floor, ${p}`, r[`floor:${procs}`], 'claim (SKIP LOCKED, token, lease: 1 stmt) + done fenced by token (1 stmt)'));
    rows.push(row(`pg-boss 10.4.2, ${p}`, r[`pgboss:${procs}`], 'fetch (1 stmt) + complete (1 stmt)'));
    rows.push(row(`floor + NOTIFY, ${p} (diag.)`, r[`floor-notify:${procs}`], 'the floor, each statement with pg_notify'));
    rows.push(row(`floor in 1 tx, ${p} (diag.)`, r[`floor-1tx:${procs}`], 'SKIP LOCKED pick + UPDATE done in one transaction'));
  }
  out.push(table(['drain', 'jobs', 'seconds', 'jobs/s', 'WAL flushes/job', 'ms/flush', 'server CPU ms/job', 'client CPU ms/job', 'one job is'], rows));
  out.push('WAL flushes: pg_stat_wal.wal_sync over the drain (server-wide), per job; ms/flush: wal_sync_time / wal_sync');
  out.push('CPU: the server\'s processes (postmaster, reaped backends, live children) and the drain processes, per job');
  out.push('');
  for (const procs of [1, PROCS]) {
    const of = (side) => r[`${side}:${procs}`];
    out.push(`per process (${procs}): taskloop ${of('taskloop').perProc.join('/')}, floor ${of('floor').perProc.join('/')}, pg-boss ${of('pgboss').perProc.join('/')}`);
    out.push(`  checks: taskloop ${of('taskloop').check}; floor ${of('floor').check}; pg-boss ${of('pgboss').check}`);
  }
  out.push('');
  for (const key of [`taskloop:1`, 'floor:1', 'pgboss:1']) {
    const x = r[key];
    if (x.statements === undefined) continue;
    const us = (ms) => fmtNum((1000 * ms) / x.ops, 0);
    out.push(`${key}: top statements by server time (pg_stat_statements, nested included), per job: calls, plan µs, exec µs, statement`);
    for (const st of x.statements) out.push(`  ${fmtNum(st.calls / x.ops, 2)}  ${us(st.plan_ms)}  ${us(st.exec_ms)}  ${st.query.slice(0, 110)}`);
    out.push('');
  }
  for (const procs of [1, PROCS]) {
    // Each run of taskloop against the floor and the pg-boss runs just after it; the median of those ratios.
    const pairs = (side) => {
      const others = r[`${side}:${procs}`].rates;
      return r[`taskloop:${procs}`].rates.map((x, i) => x / others[i]).sort((a, b) => a - b);
    };
    const median = (xs) => xs[Math.floor((xs.length - 1) / 2)];
    const [byFloor, byBoss] = [pairs('floor'), pairs('pgboss')];
    out.push(`taskloop / floor, ${procs} proc(s), each pair of adjacent runs: ${byFloor.map((x) => fmtNum(x, 2)).join(', ')}`);
    out.push(`taskloop / pg-boss, ${procs} proc(s), each pair of adjacent runs: ${byBoss.map((x) => fmtNum(x, 2)).join(', ')}`);
    ratios.push([`taskloop / floor, ${procs} proc(s), median pair`, fmtNum(median(byFloor), 2), '>= 0.5', verdict(median(byFloor) >= 0.5)]);
    ratios.push([`taskloop / pg-boss, ${procs} proc(s), median pair`, fmtNum(median(byBoss), 2), '>= 5', verdict(median(byBoss) >= 5)]);
  }
  ratios.push([`taskloop ${PROCS} procs / 1 proc`, fmtNum(r[`taskloop:${PROCS}`].perSec / r['taskloop:1'].perSec, 2), '', '']);
  for (const procs of [1, PROCS]) {
    ratios.push([`floor + NOTIFY / floor, ${procs} proc(s)`, fmtNum(r[`floor-notify:${procs}`].perSec / r[`floor:${procs}`].perSec, 2), '', '']);
    ratios.push([`taskloop / floor in 1 tx, ${procs} proc(s)`, fmtNum(r[`taskloop:${procs}`].perSec / r[`floor-1tx:${procs}`].perSec, 2), '', '']);
  }
}

function pickups(r, { PICKUP, PICKUP_WARMUP, GAP_MS }, out, ratios) {
  const keys = ['pickup:1', 'pickup:2', 'pickup-floor:1', 'pickup-floor:2'].filter((k) => r[k] !== undefined);
  const pick = (x) => [
    `${x.floor ? 'bare pg, ' : ''}${x.consumers} consumer${x.consumers === 1 ? '' : 's'}`,
    fmtInt(x.samples),
    ...[x.p50, x.p90, x.p99, x.max].map((v) => fmtNum(v, 2)),
    fmtInt(x.over2),
    fmtInt(x.over10),
    pair(x.commitP50, x.commitP99),
    pair(x.createP50, x.createP99),
    pair(x.claimP50, x.claimP99),
  ];
  out.push(`pickup latency in ms: producer's createTask call → consumer's claim returned; ${fmtInt(PICKUP)} tasks ${GAP_MS} ms apart after ${fmtInt(PICKUP_WARMUP)} untimed`);
  out.push("  bare pg: the same with an INSERT + pg_notify (1 statement) and a SKIP LOCKED claim (1 statement): pickup's floor on this server");
  out.push(
    table(
      ['consumers', 'tasks', 'p50', 'p90', 'p99', 'max', '> 2 ms', '> 10 ms', 'createTask returned → claimed p50 / p99', 'createTask p50 / p99', 'its claim call p50 / p99'],
      keys.map((k) => pick(r[k])),
    ),
  );
  for (const k of keys) {
    const w = r[k].wal;
    const wal = w === undefined ? '' : `; WAL flushes ${fmtInt(w.syncs)} (${perFlush(w)} ms each)`;
    out.push(`  ${r[k].floor ? 'bare pg, ' : ''}${r[k].consumers} consumer(s): ${r[k].perConsumer.join('; ')}${wal}; clock offset between processes ≤ ${fmtNum(r[k].maxOffsetMs, 3)} ms (ping RTT ≤ ${fmtNum(r[k].maxRttMs, 3)} ms)`);
  }
  out.push('');
  for (const k of keys.filter((x) => !r[x].floor)) {
    ratios.push([`pickup p50 ms, ${r[k].consumers} consumer(s)`, fmtNum(r[k].p50, 2), '<= 2', verdict(r[k].p50 <= 2)]);
    ratios.push([`pickup p99 ms, ${r[k].consumers} consumer(s)`, fmtNum(r[k].p99, 2), '<= 10', verdict(r[k].p99 <= 10)]);
    const floor = r[`pickup-floor:${r[k].consumers}`];
    if (floor !== undefined) ratios.push([`pickup p50 / bare pg pickup p50, ${r[k].consumers} consumer(s)`, fmtNum(r[k].p50 / floor.p50, 2), '', '']);
  }
}

function latencies(r, { SMALL, BIG }, out, ratios) {
  const [small, big] = r.lat;
  const lat = (x) => [`${fmtInt(x.backlog)} pending`, fmtInt(x.samples), ...[x.p50, x.p90, x.p99, x.p999, x.max].map((v) => fmtNum(v, 0)), `${fmtInt(x.over5ms)} (${fmtNum((100 * x.over5ms) / x.samples, 2)}%)`];
  out.push('claimTask({agent, start:true}) latency in µs; the backlogs are timed interleaved; each claim is followed by an');
  out.push('  untimed review→completed and an untimed createTask, so the backlog stays constant');
  out.push(table(['backlog', 'claims', 'p50', 'p90', 'p99', 'p99.9', 'max', 'claims > 5 ms'], [lat(small), lat(big)]));
  out.push('');
  const p99Ratio = big.p99 / small.p99;
  ratios.push([`claim p99 @${fmtInt(BIG)} / p99 @${fmtInt(SMALL)}`, fmtNum(p99Ratio, 2), '<= 1.5', verdict(p99Ratio <= 1.5)]);
}

function recoveries(r, out, ratios) {
  const x = r.recovery;
  out.push(`recovery in ms: SIGKILL of the daemon on host-victim mid-wait → run.resumed by the daemon on host-peer (--dead-after default 4 s); ${x.rounds} rounds`);
  out.push(`  each round: ${x.samples.map((s) => `${fmtInt(s.ms)}${s.claimMs === undefined ? '' : ` (reclaim → resumed ${fmtInt(s.claimMs)})`}`).join(', ')}`);
  out.push(`  min ${fmtInt(x.min)}, p50 ${fmtInt(x.p50)}, max ${fmtInt(x.max)}`);
  out.push('');
  ratios.push(['recovery max ms (killed daemon → resumed on another host)', fmtInt(x.max), '<= 5000', verdict(x.max <= 5000)]);
}

/** The report's lines (the caller adds the wall time). */
export function report(r, ctx) {
  const s = ctx.settings ?? {};
  const out = [];
  out.push('taskloop PostgreSQL benchmark');
  out.push(`machine: ${ctx.machine}`);
  out.push(
    `server: PostgreSQL ${s.server_version} (${ctx.where}), fsync=${s.fsync}, synchronous_commit=${s.synchronous_commit}, ` +
      `wal_sync_method=${s.wal_sync_method}, full_page_writes=${s.full_page_writes}, commit_delay=${s.commit_delay}, ` +
      `shared_buffers=${s.shared_buffers}, max_connections=${s.max_connections}, track_wal_io_timing=${s.track_wal_io_timing}`,
  );
  out.push(`N = ${fmtInt(ctx.N)} jobs per drain; ${ctx.LOOPS} concurrent async loops per process, each loop with its own pooled connection; one fresh schema per scenario`);
  out.push('');
  const t = r.trips;
  out.push(
    `round trips (pg.Client#query calls, averaged over 50 ops): createTask ${fmtNum(t.create.perOp, 1)}, claimTask(start) ${fmtNum(t.claim.perOp, 1)}, ` +
      `review→completed ${fmtNum(t.transition.perOp, 1)}, claim finding nothing ${fmtNum(t.empty.perOp, 1)}; bare floor claim 1 + done 1 (in one tx: 4), pg-boss fetch 1 + complete 1`,
  );
  out.push(`  claim:      ${t.claim.sequence.join(' | ')}`);
  out.push(`  transition: ${t.transition.sequence.join(' | ')}`);
  out.push('');
  const ratios = [];
  const has = (keys) => keys.every((k) => r[k] !== undefined);
  const sides = ['taskloop', 'floor', 'pgboss', 'floor-notify', 'floor-1tx'];
  if (has([1, ctx.PROCS].flatMap((p) => sides.map((s) => `${s}:${p}`)))) drains(r, ctx, out, ratios);
  if (has(['pickup:1', 'pickup:2'])) pickups(r, ctx, out, ratios);
  if (has(['lat'])) latencies(r, ctx, out, ratios);
  if (has(['recovery'])) recoveries(r, out, ratios);
  if (ctx.failure !== undefined) out.push(`FAILED: ${ctx.failure}; the parts above are complete, the rest did not run`, '');
  out.push(table(['ratio', 'value', 'target', 'verdict'], ratios));
  out.push('');
  return out;
}
