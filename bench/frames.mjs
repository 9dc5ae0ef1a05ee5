/**
 * Diagnostic (not part of `npm run bench:queue`): how many WAL frames one task's lifecycle
 * writes, and to which b-tree each belongs. Every frame is one page written twice (frame
 * header and page) at commit, and copied back and synced at the next checkpoint, so frames
 * per task is the I/O cost of a lifecycle.
 *
 *   npm run build && node bench/frames.mjs        # BENCH_N tasks (default 6000)
 *
 * It creates BENCH_N tasks through the API, drains half (to reach a steady state), then
 * records the frames each claim and each completion transaction appends to the WAL (with
 * auto-checkpoints off, so frames are never overwritten), and maps page numbers to b-trees
 * with the dbstat table.
 */
import { readFileSync } from 'node:fs';
import { createSqliteStore, createTaskManager } from '../dist/engine/index.js';
import { ACCEPTANCE, OPERATOR, precreate } from './lib/taskloop.mjs';
import { createScratch, fmtNum, table } from './lib/util.mjs';

const N = Number(process.env.BENCH_N ?? 6000);
const SAMPLES = 200;
const scratch = createScratch();
const path = scratch.file('frames');
const store = createSqliteStore({ path, checkpoints: 'inline' });
const manager = createTaskManager({ store });
const agent = { id: 'agent-1', role: 'agent' };
const lifecycle = async (between) => {
  const task = await manager.claimTask({ agent: agent.id, start: true });
  between?.();
  await manager.transitionTask({ taskId: task.id, to: 'review', actor: agent, claimToken: task.claimToken, then: [{ to: 'completed', actor: ACCEPTANCE }] });
};

try {
  await precreate(manager, N);
  for (let i = 0; i < N / 2; i++) await lifecycle();
  const db = store.db;
  const pageSize = db.pragma('page_size', { simple: true });
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.pragma('wal_autocheckpoint = 0');
  const frames = () => {
    const wal = readFileSync(`${path}-wal`);
    const pages = [];
    for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) pages.push(wal.readUInt32BE(at));
    return pages;
  };
  const log = { claim: [], complete: [] };
  let seen = 0;
  for (let i = 0; i < SAMPLES; i++) {
    await lifecycle(() => {
      const all = frames();
      log.claim.push(...all.slice(seen));
      seen = all.length;
    });
    const all = frames();
    log.complete.push(...all.slice(seen));
    seen = all.length;
  }
  db.pragma('wal_checkpoint(TRUNCATE)');
  const btree = new Map(
    db.prepare('SELECT pageno, name, pagetype FROM dbstat').all().map((r) => [r.pageno, r.pagetype === 'internal' ? `${r.name} (interior)` : r.name]),
  );
  const tally = (pages) => {
    const counts = new Map();
    for (const page of pages) {
      const name = page === 1 ? 'page 1 (file header)' : btree.get(page) ?? 'freed';
      counts.set(name, (counts.get(name) ?? 0) + 1);
    }
    return counts;
  };
  const claim = tally(log.claim);
  const complete = tally(log.complete);
  const names = [...new Set([...claim.keys(), ...complete.keys()])].sort();
  const per = (m, k) => (m.get(k) ?? 0) / SAMPLES;
  const rows = names.map((k) => [k, fmtNum(per(claim, k)), fmtNum(per(complete, k))]);
  rows.push(['total', fmtNum(log.claim.length / SAMPLES), fmtNum(log.complete.length / SAMPLES)]);
  console.log(`WAL frames per transaction, page size ${pageSize} B, ${SAMPLES} lifecycles after ${N / 2} of ${N} tasks drained`);
  console.log(table(['b-tree', 'claim+start', 'review+complete'], rows));
  console.log(`frames per task: ${fmtNum((log.claim.length + log.complete.length) / SAMPLES)}`);
} finally {
  await manager.close();
  scratch.remove();
}
