/**
 * Write transactions per step kind (workers/journal.ts), counted at the store's one write
 * entry point, with a claim that opens its run (RunStore.claimRun).
 */
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type RunStore, type SqliteTaskStore, type TaskManager, createSqliteRunStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { createJournal } from '../../src/workers/journal.js';
import { operator, tempDir } from '../helpers.js';
import { card, drive, loopContext } from './harness.js';
import type { Harness } from './harness.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import { builtInTools } from '../../src/tools/builtin.js';
// @ts-expect-error a plain JavaScript fixture module
import { tools as testTools } from '../fixtures/test-tools.mjs';

interface Counted extends Harness {
  writes: string[];
}

/** A harness whose run store counts every write transaction it makes. */
function counted(): Counted {
  const dir = tempDir();
  const path = join(dir, 'journal.db');
  const store = createSqliteStore({ path });
  const writes: string[] = [];
  const countingStore: SqliteTaskStore = { ...store, write: (what, fn) => (writes.push(what), store.write(what, fn)) };
  const tm: TaskManager = createTaskManager({ store });
  onTestFinished(() => tm.close());
  const runs: RunStore = createSqliteRunStore(countingStore);
  return { dir, path, tm, runs, tools: createToolRegistry([...builtInTools(), ...testTools]), writes, other: () => { throw new Error('unused'); } };
}

async function runCard(h: Counted, c: Record<string, unknown>) {
  await h.tm.createTask({ title: 'count writes', card: c }, operator);
  const claimed = (await h.runs.claimRun({ agent: 'worker', withCard: true }, (t, now) => budgetOfTask(t.card, now)))!;
  const result = await drive(loopContext(h, claimed.task, { opened: claimed.opened }));
  return { result, writes: [...h.writes] };
}

describe('writes per step', () => {
  it('a one-read card is three write transactions: claim with its run, the read with its decision, the ending with the rest', async () => {
    const h = counted();
    const { result, writes } = await runCard(h, card({ allowed_tools: ['echo'], script: [{ action: 'tool', tool: 'echo', args: { text: 'x' } }, { action: 'done' }] }));
    expect(result.result.phase).toBe('completed');
    expect(writes).toEqual(['claim run', 'begin step', 'finish run']);
    // Every step is still written: two decisions and the read, in order, each finished.
    const steps = (await h.runs.getRun(result.result.runId)).steps;
    expect(steps.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'decide', 'ok'], [2, 'action', 'ok'], [3, 'decide', 'ok']]);
  });

  it('a run of reads is one write per loop iteration; a write is two (its intent, then its outcome)', async () => {
    const h = counted();
    const reads = Array.from({ length: 10 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const { writes } = await runCard(h, card({ allowed_tools: ['echo'], budget: { max_steps: 30 }, script: [...reads, { action: 'done' }] }));
    expect(writes).toEqual(['claim run', ...Array(10).fill('begin step'), 'finish run']);

    const w = counted();
    const file = join(w.dir, 'out.log');
    const { writes: withWrite } = await runCard(w, card({ allowed_tools: ['log_append'], script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'x' } }, { action: 'done' }] }));
    expect(withWrite).toEqual(['claim run', 'begin step', 'finish step', 'finish run']);
  });

  it('held-back steps are written on their own within the flush interval when nothing else writes (a slow planner)', async () => {
    const h = counted();
    await h.tm.createTask({ title: 'held', card: card() }, operator);
    const claimed = (await h.runs.claimRun({ agent: 'worker' }, (t, now) => budgetOfTask(t.card, now)))!;
    const fence = { taskId: claimed.task.id, claimToken: claimed.task.claimToken, agent: 'worker' };
    const journal = createJournal(h.runs, fence);
    const usage = claimed.opened.run.usage;
    journal.record({ runId: claimed.opened.run.id, kind: 'decide', status: 'ok', result: { action: 'done' }, durationMs: 1, startedAt: Date.now(), usage }, 1);
    expect((await h.runs.getRun(claimed.opened.run.id)).steps).toEqual([]);
    await new Promise((r) => setTimeout(r, 100));
    expect((await h.runs.getRun(claimed.opened.run.id)).steps.map((s) => s.kind)).toEqual(['decide']);
    expect(h.writes).toEqual(['claim run', 'write steps']);
    await journal.close();
  });
});
