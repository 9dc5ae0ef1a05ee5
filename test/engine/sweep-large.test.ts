/**
 * A sweep whose one reclaim cancels 130,000 dependents (SQLite; the cost is the creating).
 * Its events were appended with a spread, which V8 refuses past ~120,000 arguments: the batch
 * had committed, and the sweep threw a RangeError with no code, its other batches not run.
 */
import { describe, expect, it } from 'vitest';
import { agent, freshManager, operator } from '../helpers.js';

describe('a sweep with a very large cascade', () => {
  it('fails a task on its last attempt with 130,000 tasks hung under it, and requeues the stale task beside it', async () => {
    const tm = freshManager();
    const root = (await tm.createTask({ title: 'root', maxAttempts: 1 }, operator)).task;
    const beside = (await tm.createTask({ title: 'beside' }, operator)).task;
    let last = root.id;
    for (let i = 0; i < 130_000; i += 1000) {
      const batch = Array.from({ length: 1000 }, (_, j) => (j === 0 ? { title: 'l', dependsOn: [last], ref: 'l0' } : { title: 'l', dependsOnRefs: [`l${j - 1}`], ref: `l${j}` }));
      last = (await tm.createTasks(batch, agent('mallory'))).at(-1)!.task.id;
    }
    await tm.claimTask({ agent: 'dead', taskId: root.id, leaseMs: 100, start: true });
    await tm.claimTask({ agent: 'dead', taskId: beside.id, leaseMs: 100, start: true });
    await new Promise((r) => setTimeout(r, 150));
    const swept = await tm.sweep({ graceMs: 0 });
    expect(swept).toEqual({ marked: 2, requeued: [beside.id], failed: [root.id] });
    expect((await tm.stats()).byState).toMatchObject({ cancelled: 130_000, failed: 1, pending: 1 });
    expect((await tm.getTask(last)).state).toBe('cancelled');
  }, 120_000);
});
