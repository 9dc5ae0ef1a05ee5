/**
 * The stale sweep is how every dead worker's tasks come back, so no one task may stop it and
 * no pass may hold the write lock for as long as some agent's claims make it (sweeps.ts).
 */
import { describe, expect, it } from 'vitest';
import { type Budget, describeSweep } from '../../src/engine/index.js';
import { execSql, portsOf } from '../stores.js';
import { agent, freshManager, operator } from '../helpers.js';

const BUDGET: Budget = { maxSteps: 20, maxFailures: 3, maxWriteCalls: null, maxPending: null, deadlineAt: null, maxTokens: 1000, maxCost: null };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the stale sweep', () => {
  it('reclaims the others when one task cannot be reclaimed, and names that one with its reason', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const before = (await tm.createTask({ title: 'stale before it' }, operator)).task;
    const poisoned = (await tm.createTask({ title: 'its run row is damaged', card: { goal: 'g' }, maxAttempts: 1 }, operator)).task;
    const after = (await tm.createTask({ title: 'stale after it' }, operator)).task;
    await tm.claimTask({ agent: 'dead', taskId: before.id, leaseMs: 100, start: true });
    const run = (await runs.claimRun({ agent: 'dead', taskId: poisoned.id, leaseMs: 100 }, () => BUDGET))!;
    expect(run.task.id).toBe(poisoned.id);
    await tm.claimTask({ agent: 'dead', taskId: after.id, leaseMs: 100, start: true });
    // Its last attempt ran out: the sweep fails it and ends its open run, reading the run's
    // usage, which no longer parses. Before, that one error rolled back the whole sweep.
    await execSql(tm, "UPDATE runs SET usage = 'not json' WHERE task_id = $1", [poisoned.id]);
    await sleep(150);

    const swept = await tm.sweep({ graceMs: 0 });
    expect(swept).toEqual({
      marked: 3,
      requeued: [before.id, after.id],
      failed: [],
      skipped: [{ taskId: poisoned.id, code: 'SyntaxError', message: expect.stringMatching(/JSON/) }],
    });
    // What a daemon and `taskloop serve` log for it.
    expect(describeSweep(swept)).toBe(`sweep: requeued ${before.id}, ${after.id}, failed -; could not reclaim ${poisoned.id} (SyntaxError: ${swept.skipped![0]!.message})`);
    expect((await tm.getTask(before.id)).state).toBe('pending');
    expect((await tm.getTask(after.id)).state).toBe('pending');
    // Left as it was, and named again by the next sweep until someone mends it.
    const left = await tm.getTask(poisoned.id);
    expect(left.state).toBe('in_progress');
    expect(left.events.some((e) => e.type === 'task.stale_reclaimed')).toBe(false);
    expect((await tm.sweep({ graceMs: 0 })).skipped).toEqual([expect.objectContaining({ taskId: poisoned.id })]);

    await execSql(tm, "UPDATE runs SET usage = '{}' WHERE task_id = $1", [poisoned.id]);
    expect(await tm.sweep({ graceMs: 0 })).toEqual({ marked: 0, requeued: [], failed: [poisoned.id] });
  });

  it('reclaims every one of 1,200 expired claims of one agent, in order, past its first batch of 500', async () => {
    const tm = freshManager();
    const created = [];
    for (let i = 0; i < 1200; i += 600) created.push(...(await tm.createTasks(Array.from({ length: 600 }, (_, j) => ({ title: `t${i + j}` })), operator)));
    for (let i = 0; i < 1200; i++) await tm.claimTask({ agent: 'hoarder', leaseMs: 100 });
    await sleep(150);
    const swept = await tm.sweep({ graceMs: 0 });
    expect(swept.marked).toBe(1200);
    expect(swept.requeued).toEqual(created.map((c) => c.task.id));
    expect((await tm.stats()).byState).toMatchObject({ pending: 1200, claimed: 0 });
    // Claimed again at once: nothing was left marked or half done.
    expect((await tm.claimTask({ agent: agent('next').id }))?.id).toBe(created[0]!.task.id);
  });
});
