/**
 * Followers of the event log on one `taskloop serve`: K clients of `GET /api/events` (SSE)
 * while another process creates BENCH_N (500) tasks BENCH_GAP_MS (2) ms apart. Per K (BENCH_K,
 * default 1,10,30; the server admits 32 streams per identity): the server's CPU per create
 * and the events delivered. `npm run bench:followers`.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { OPERATOR, openStore } from '../dist/index.js';
import { cpuSecondsOf, createScratch, fmtInt, fmtNum, log, table } from './lib/util.mjs';

const N = Number(process.env.BENCH_N ?? 500);
const GAP = Number(process.env.BENCH_GAP_MS ?? 2);
const KS = (process.env.BENCH_K ?? '1,10,30').split(',').map(Number);
const BIN = fileURLToPath(new URL('../bin/taskloop', import.meta.url));
const scratch = createScratch();

async function run(k) {
  const db = scratch.file(`f${k}`);
  const port = 17000 + Math.floor(Math.random() * 2000);
  const server = spawn(process.execPath, [BIN, '--db', db, 'serve', '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  server.stdout.on('data', (d) => (out += d));
  server.stderr.on('data', (d) => (out += d));
  const ac = new AbortController();
  const store = await openStore({ path: db });
  try {
    for (let t = Date.now(); !/listening/.test(out); await sleep(50)) if (Date.now() - t > 30_000) throw new Error(`serve did not start: ${out}`);
    const token = readFileSync(`${db}.http-token`, 'utf8').trim();
    let delivered = 0;
    for (let i = 0; i < k; i++) {
      const res = await fetch(`http://127.0.0.1:${port}/api/events`, { headers: { authorization: `Bearer ${token}` }, signal: ac.signal });
      if (res.status !== 200) throw new Error(`stream ${i}: ${res.status}`);
      void (async () => {
        const text = new TextDecoder();
        try {
          for await (const chunk of res.body) delivered += (text.decode(chunk).match(/^id:/gm) ?? []).length;
        } catch {
          // aborted at the end
        }
      })();
    }
    await sleep(300);
    const cpu0 = cpuSecondsOf(server.pid);
    for (let i = 0; i < N; i++) {
      await store.tm.createTask({ title: `t${i}` }, OPERATOR);
      await sleep(GAP);
    }
    for (let t = Date.now(); delivered < N * k && Date.now() - t < 20_000; ) await sleep(20);
    return { cpuMsPerCreate: ((cpuSecondsOf(server.pid) - cpu0) * 1000) / N, delivered, expected: N * k };
  } finally {
    ac.abort();
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    await store.close();
  }
}

const load0 = loadavg()[0];
const rows = [];
try {
  for (const k of KS) {
    log(`${k} follower(s) …`);
    const r = await run(k);
    rows.push([String(k), fmtNum(r.cpuMsPerCreate, 3), `${fmtInt(r.delivered)} of ${fmtInt(r.expected)}`]);
  }
} finally {
  scratch.remove();
}
console.log(`taskloop followers benchmark — ${availableParallelism()} CPUs, node ${process.version}, load average ${load0.toFixed(2)} → ${loadavg()[0].toFixed(2)}; ${fmtInt(N)} creates ${GAP} ms apart`);
console.log(table(['SSE followers', 'server CPU ms per create', 'events delivered'], rows));
