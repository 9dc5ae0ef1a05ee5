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
  it('a one-read card is two write transactions: claim with its run, the ending with the read and the decisions', async () => {
    const h = counted();
    const { result, writes } = await runCard(h, card({ allowed_tools: ['echo'], script: [{ action: 'tool', tool: 'echo', args: { text: 'x' } }, { action: 'done' }] }));
    expect(result.result.phase).toBe('completed');
    // Two in all; a loaded machine may stretch the run past FLUSH_MS, and then what was held
    // back goes out once on its own in between (never a step's own begin).
    expect(writes.filter((w) => w !== 'write steps')).toEqual(['claim run', 'finish run']);
    expect(writes.length).toBeLessThanOrEqual(3);
    // Every step is still written: two decisions and the read, in order, each finished; the
    // read was recorded whole, with its call's key and its own start and end.
    const steps = (await h.runs.getRun(result.result.runId)).steps;
    expect(steps.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'decide', 'ok'], [2, 'action', 'ok'], [3, 'decide', 'ok']]);
    // The steps held back went out with the run's ending, their checkpoint with it (one UPDATE of the run).
    expect((await h.runs.getRun(result.result.runId)).checkpointVersion).toBe(3);
    expect(steps[1]).toMatchObject({ tool: 'echo', args: { text: 'x' }, result: { text: 'x' }, idempotencyKey: expect.any(String) });
    expect(steps[1]!.startedAt).toBeLessThanOrEqual(steps[1]!.finishedAt!);
    const events = (await h.tm.getTask(result.result.taskId)).events.map((e) => e.type).filter((t) => t.startsWith('run.step'));
    expect(events).toEqual(['run.step_finished', 'run.step_finished', 'run.step_finished']);
  });

  it('a run of reads writes in batches, not per step; a write is two (its intent, then its outcome)', async () => {
    const h = counted();
    const reads = Array.from({ length: 100 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const { result, writes } = await runCard(h, card({ allowed_tools: ['echo'], budget: { max_steps: 300 }, script: [...reads, { action: 'done' }] }));
    expect(result.result.phase).toBe('completed');
    // No read begins on its own; held-back steps go out at most every FLUSH_MS or MAX_HELD
    // writes (a run of 100 reads takes a few ms: usually none before the ending).
    expect(writes[0]).toBe('claim run');
    expect(writes.at(-1)).toBe('finish run');
    const batches = writes.slice(1, -1);
    expect(batches.every((w) => w === 'write steps')).toBe(true);
    expect(batches.length).toBeLessThan(25);
    const steps = (await h.runs.getRun(result.result.runId)).steps;
    expect(steps).toHaveLength(201);
    expect(steps.map((s) => s.seq)).toEqual(steps.map((_, i) => i + 1));
    expect(steps.filter((s) => s.kind === 'action').map((s) => s.args)).toEqual(reads.map((r) => r.args));

    const w = counted();
    const file = join(w.dir, 'out.log');
    const { writes: withWrite } = await runCard(w, card({ allowed_tools: ['log_append'], script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'x' } }, { action: 'done' }] }));
    expect(withWrite.filter((x) => x !== 'write steps')).toEqual(['claim run', 'begin step', 'finish step', 'finish run']);
  });

  it('a read still running at the flush gets its started row then (a slow call shows as running), and its outcome on that row', async () => {
    const h = counted();
    await h.tm.createTask({ title: 'slow read', card: card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 300 } }, { action: 'done' }] }) }, operator);
    const claimed = (await h.runs.claimRun({ agent: 'worker', withCard: true }, (t, now) => budgetOfTask(t.card, now)))!;
    const driving = drive(loopContext(h, claimed.task, { opened: claimed.opened }));
    const runId = claimed.opened.run.id;
    // Within the flush interval of its start, the wait is on the store as started, after its decision.
    let running: Awaited<ReturnType<RunStore['getRun']>>['steps'] = [];
    for (let i = 0; i < 100 && running.length < 2; i++) {
      await new Promise((r) => setTimeout(r, 5));
      running = (await h.runs.getRun(runId)).steps;
    }
    expect(running.map((s) => [s.seq, s.kind, s.status, s.tool])).toEqual([[1, 'decide', 'ok', null], [2, 'action', 'started', 'wait']]);
    const { result } = await driving;
    expect(result.phase).toBe('completed');
    const steps = (await h.runs.getRun(runId)).steps;
    expect(steps.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'decide', 'ok'], [2, 'action', 'ok'], [3, 'decide', 'ok']]);
    // The same row was finished (not a second one), and it kept the time the call began.
    expect(steps[1]!.id).toBe(running[1]!.id);
    expect(steps[1]!.startedAt).toBe(running[1]!.startedAt);
    expect(steps[1]!.finishedAt! - steps[1]!.startedAt).toBeGreaterThanOrEqual(250);
    // The begin went out on its own (the flush); the outcome rode on the ending (or, on a
    // loaded machine, on a flush of its own before it).
    expect(h.writes.slice(0, 2)).toEqual(['claim run', 'write steps']);
    expect(h.writes.slice(2).filter((x) => x !== 'write steps')).toEqual(['finish run']);
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

  it('a read whose outcome comes while its begin is being written keeps its place: what was held after it is written after it', async () => {
    const h = counted();
    await h.tm.createTask({ title: 'order', card: card() }, operator);
    const claimed = (await h.runs.claimRun({ agent: 'worker' }, (t, now) => budgetOfTask(t.card, now)))!;
    const fence = { taskId: claimed.task.id, claimToken: claimed.task.claimToken, agent: 'worker' };
    const runId = claimed.opened.run.id;
    // A store whose step writes take a while (a busy database): the journal's batch is in flight.
    let release: () => void = () => undefined;
    const slow: RunStore = {
      ...h.runs,
      writeSteps: async (f, writes) => {
        await new Promise<void>((r) => (release = r));
        return h.runs.writeSteps(f, writes);
      },
    };
    const journal = createJournal(slow, fence);
    const usage = (steps: number) => ({ ...claimed.opened.run.usage, steps });
    const now = Date.now();
    journal.record({ runId, kind: 'decide', status: 'ok', result: { action: 'tool' }, durationMs: 1, startedAt: now, usage: usage(1) }, 1);
    const started = journal.beginLater({ runId, kind: 'observe', tool: 'screen', args: {}, idempotencyKey: 'k' }, 2);
    const flushing = journal.flush(); // the decision and the read's begin, in flight
    await new Promise((r) => setTimeout(r, 10));
    journal.finishLater(started, { stepId: started.id, status: 'ok', result: { seen: 1 }, durationMs: 3, usage: usage(2), screen: new Uint8Array([1]) });
    journal.record({ runId, kind: 'decide', status: 'ok', result: { action: 'done' }, durationMs: 1, startedAt: Date.now(), usage: usage(3) }, 3);
    release();
    await flushing;
    const closing = journal.close();
    await new Promise((r) => setTimeout(r, 10));
    release();
    await closing;
    const run = await h.runs.getRun(runId);
    expect(run.steps.map((s) => [s.seq, s.kind, s.status])).toEqual([[1, 'decide', 'ok'], [2, 'observe', 'ok'], [3, 'decide', 'ok']]);
    // The run's usage is the last step's, not the read's, which finished before it.
    expect(run.usage.steps).toBe(3);
    expect(run.screen).toMatchObject({ seq: 2 });
  });
});
