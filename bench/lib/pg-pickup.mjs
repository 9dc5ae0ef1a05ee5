/**
 * Pickup across processes: consumer processes wait on `store.watch` (LISTEN/NOTIFY) and
 * claim; a producer process creates tasks 5 ms apart. Latency = the consumer's clock when
 * its claim returned − the producer's clock just before it called createTask, both
 * `performance.timeOrigin + performance.now()` (pg-pickup-child.mjs). So one sample is the
 * producer's create transaction + NOTIFY delivery + the consumer's wake-up + its claim.
 * Beside it: from the createTask call's return (the commit seen by the producer) to the
 * claim's return, the createTask call itself, and the claim call that took the task.
 */
import { fileURLToPath } from 'node:url';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { spawnChild } from './pg-procs.mjs';
import { adminQuery, schemaUrl, walReset, walStats } from './pg-server.mjs';
import { percentile } from './util.mjs';

const CHILD = fileURLToPath(new URL('./pg-pickup-child.mjs', import.meta.url));
const clock = () => performance.timeOrigin + performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until `check()` is true, polling every `everyMs`; throws after `ms`. */
async function until(what, check, ms, everyMs) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`pickup: timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * The child's clock minus ours, from the ping with the shortest round trip (the error is at
 * most half that round trip). Returns { offsetMs, rttMs }.
 */
async function clockOffset(child, pings = 30) {
  let best = { rttMs: Infinity, offsetMs: NaN };
  for (let id = 0; id < pings; id++) {
    const reply = child.next('pong');
    const t0 = clock();
    child.send({ type: 'ping', id });
    const m = await reply;
    const t1 = clock();
    if (t1 - t0 < best.rttMs) best = { rttMs: t1 - t0, offsetMs: m.clock - (t0 + t1) / 2 };
  }
  return best;
}

export async function benchPickup(url, schema, { count, warm, gapMs, consumers }) {
  const store = createPgStore({ url: schemaUrl(url, schema) });
  await store.ready; // migrated before anyone races for it
  await store.close();

  const cons = Array.from({ length: consumers }, (_, i) => spawnChild(CHILD, { role: 'consumer', url, schema, agent: `consumer-${i + 1}` }));
  const prod = spawnChild(CHILD, { role: 'producer', url, schema, count, warm, gapMs });
  const all = [...cons, prod];
  try {
    await Promise.all(all.map((c) => c.next('ready')));
    // Each consumer's LISTEN connection is up once its last statement was the LISTEN
    // (watch.ts may LISTEN on more than one channel in that statement).
    const listen = `LISTEN taskloop_${schema}`;
    const listening = async () => (await adminQuery(url, 'SELECT count(*) AS n FROM pg_stat_activity WHERE position($1 in query) > 0', [listen]))[0].n;
    await until('the consumers to LISTEN', async () => (await listening()) >= consumers, 15_000, 20);
    const clocks = [];
    for (const c of all) clocks.push(await clockOffset(c));

    const counted = await walReset(url);
    const produced = prod.next('done');
    prod.send({ type: 'go' });
    const { created } = await produced;
    const total = warm + count;
    const completed = async () => (await adminQuery(url, "SELECT count(*) AS n FROM tasks WHERE state = 'completed'", [], schema))[0].n === total;
    await until('every task to be claimed and completed', completed, 120_000, 100);
    const wal = counted ? await walStats(url) : undefined;

    const reports = [];
    for (const c of cons) {
      const r = c.next('done');
      c.send({ type: 'report' });
      reports.push(await r);
    }
    const claimedAt = new Map(reports.flatMap((r) => r.samples).filter(([, w]) => !w).map(([n, , called, at]) => [n, { called, at }]));
    if (claimedAt.size !== count || created.length !== count) throw new Error(`pickup: ${claimedAt.size} timed claims, ${created.length} creates, of ${count}`);
    const sorted = (xs) => xs.sort((a, b) => a - b);
    const rows = created.map(([n, call, ret]) => ({ call, ret, ...claimedAt.get(n) }));
    const lat = sorted(rows.map((x) => x.at - x.call));
    const fromCommit = sorted(rows.map((x) => x.at - x.ret));
    const claimMs = sorted(rows.map((x) => x.at - x.called));
    const creates = sorted(rows.map((x) => x.ret - x.call));
    const at = (p) => percentile(lat, p);
    return {
      consumers,
      samples: lat.length,
      p50: at(50),
      p90: at(90),
      p99: at(99),
      max: lat[lat.length - 1],
      over2: lat.filter((x) => x > 2).length,
      over10: lat.filter((x) => x > 10).length,
      createP50: percentile(creates, 50),
      createP99: percentile(creates, 99),
      commitP50: percentile(fromCommit, 50),
      commitP99: percentile(fromCommit, 99),
      claimP50: percentile(claimMs, 50),
      claimP99: percentile(claimMs, 99),
      perConsumer: reports.map((r) => `${r.claims} claimed, ${r.empty} empty claims`),
      wal,
      maxOffsetMs: Math.max(...clocks.map((c) => Math.abs(c.offsetMs))),
      maxRttMs: Math.max(...clocks.map((c) => c.rttMs)),
    };
  } catch (err) {
    for (const c of all) c.kill();
    throw err;
  } finally {
    for (const c of all) {
      try {
        if (c.child.connected) c.send({ type: 'exit' });
      } catch {
        // already gone
      }
    }
    await Promise.allSettled(all.map((c) => c.exited()));
  }
}
