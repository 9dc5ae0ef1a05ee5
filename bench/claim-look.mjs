/**
 * What a daemon's empty look costs (a claimRun that finds nothing: the daemon claims only tasks
 * with a card) with N tasks without a card pending (2000): 2,000 looks timed after 200, in
 * this process, on a fresh file. `npm run build` first.
 */
import { createSqliteRunStore, createSqliteStore, createTaskManager } from '../dist/engine/index.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
const dir = mkdtempSync(join(tmpdir(), 'pick-'));
const N = Number(process.env.N ?? 2000);
const store = createSqliteStore({ path: join(dir, 't.db') });
const tm = createTaskManager({ store });
const op = { id: 'operator', role: 'operator' };
for (let i = 0; i < N; i += 1000) await tm.createTasks(Array.from({ length: Math.min(1000, N - i) }, (_, j) => ({ title: `a${i + j}` })), op);
const runs = createSqliteRunStore(store);
const budget = () => ({ maxSteps: 3, maxFailures: 3, maxTokens: 0, deadlineAt: null });
for (let i = 0; i < 200; i++) await runs.claimRun({ agent: 'd', withCard: true }, budget);
const t0 = performance.now();
const K = 2000;
for (let i = 0; i < K; i++) if ((await runs.claimRun({ agent: 'd', withCard: true }, budget)) !== null) throw new Error('claimed');
console.log(`N=${N}: ${(((performance.now() - t0) / K) * 1000).toFixed(1)} µs per empty daemon look`);
await tm.close();
rmSync(dir, { recursive: true });
