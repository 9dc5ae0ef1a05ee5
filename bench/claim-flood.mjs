/**
 * What a hostile agent's flood costs everyone's claim: N tasks (25,000) at the priority
 * everyone's work has, ahead of 2,000 real ones, that no claimer can take — reserved for a
 * made-up agent, requiring a capability no one offers, or reserved for the claimer and
 * requiring one it does not offer — against no flood, in the same run.
 * A claimer that offers a capability (`desktop`, as a daemon with a display does) meets the same
 * flood as tasks requiring one it lacks (`capable`), or that one and one it lacks (`capable2`); a
 * daemon offering six or eight (`capable6`, `capable8`) meets the first; `eight` is that daemon
 * without a flood (the cost of looking up 255 requirement sets a claim). `delayed` is no flood
 * but an operator's backlog of reminders due in 2100, in front of everyone's claims (`delayed8`:
 * requiring a capability a daemon offering eight has).
 * Time per claim (TaskManager.claimTask by `alice`), 500 claims after 50,
 * on SQLite (a private temporary folder) and on PostgreSQL (an embedded server, or
 * TASKLOOP_PG_URL; BENCH_PG=0 skips it). `npm run bench:claim`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../dist/engine/index.js';
import { startServer } from './lib/pg-server.mjs';

const N = Number(process.env.N ?? 25_000);
const K = 500;
// aimed: reserved for the claimer itself, requiring what it does not offer.
const KINDS = {
  none: {},
  reserved: { flood: { forAgent: 'ghost' } },
  requiring: { flood: { requires: ['magic'] } },
  aimed: { flood: { forAgent: 'alice', requires: ['magic'] } },
  capable: { flood: { requires: ['magic'] }, caps: ['desktop'] },
  capable2: { flood: { forAgent: 'alice', requires: ['desktop', 'magic'] }, caps: ['desktop'] },
  // A daemon offering six and eight capabilities (operators' daemons may offer more than an agent's four).
  capable6: { flood: { requires: ['magic'] }, caps: ['browser', 'desktop', 'gpu', 'network', 'python', 'shell'] },
  capable8: { flood: { requires: ['magic'] }, caps: ['browser', 'desktop', 'docker', 'gpu', 'network', 'node', 'python', 'shell'] },
  // No flood: what looking up the sets of eight capabilities costs a claim by itself.
  eight: { caps: ['browser', 'desktop', 'docker', 'gpu', 'network', 'node', 'python', 'shell'] },
  // Not a flood but an operator's backlog: reminders due in 2100 (only an operator delays a task).
  delayed: { flood: { runAfter: Date.UTC(2100, 0, 1) }, by: 'operator' },
  delayed8: { flood: { runAfter: Date.UTC(2100, 0, 1), requires: ['desktop'] }, by: 'operator', caps: ['browser', 'desktop', 'docker', 'gpu', 'network', 'node', 'python', 'shell'] },
};
// BENCH_CLAIM_KINDS: a comma list of the kinds to run (all by default; `none` always runs: the ratios are to it).
const ONLY = process.env.BENCH_CLAIM_KINDS?.split(',');
const mallory = { id: 'mallory', role: 'agent' };
const operator = { id: 'operator', role: 'operator' };

async function claimUs(path, kind) {
  const store = await openStore({ path });
  const { tm } = store;
  try {
    const junk = KINDS[kind].flood === undefined ? 0 : N;
    for (let i = 0; i < junk; i += 1000) await tm.createTasks(Array.from({ length: Math.min(1000, junk - i) }, (_, j) => ({ title: `junk ${i + j}`, ...KINDS[kind].flood })), KINDS[kind].by === 'operator' ? operator : mallory);
    for (let i = 0; i < 2000; i += 1000) await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `real ${i + j}` })), operator);
    const claimer = { agent: 'alice', capabilities: KINDS[kind].caps };
    for (let i = 0; i < 50; i++) await tm.claimTask(claimer);
    const t0 = performance.now();
    for (let i = 0; i < K; i++) {
      const task = await tm.claimTask(claimer);
      if (!task?.title.startsWith('real')) throw new Error(`claimed ${task?.title}`);
    }
    return ((performance.now() - t0) / K) * 1000;
  } finally {
    await store.close();
  }
}

async function run(label, pathOf) {
  const us = {};
  for (const kind of Object.keys(KINDS).filter((k) => k === 'none' || ONLY === undefined || ONLY.includes(k))) us[kind] = await claimUs(pathOf(kind), kind);
  const row = Object.entries(us).map(([k, v]) => `${k} ${v.toFixed(0)} µs${k === 'none' ? '' : ` (${(v / us.none).toFixed(2)}x)`}`);
  console.log(`${label}, N=${N}: ${row.join(', ')}`);
}

const dir = mkdtempSync(join(tmpdir(), 'claim-flood-'));
try {
  await run('sqlite', (kind) => join(dir, `${kind}.db`));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
if (process.env.BENCH_PG !== '0') {
  const server = await startServer();
  try {
    await run('postgres', (kind) => `${server.url}${server.url.includes('?') ? '&' : '?'}schema=claim_flood_${kind}_${process.pid}`);
  } finally {
    await server.stop();
  }
}
