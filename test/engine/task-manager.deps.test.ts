import { describe, expect, it } from 'vitest';
import type { TaskManager } from '../../src/engine/index.js';
import { agent, fakeClock, freshManager, operator, system } from '../helpers.js';

/** Claims the named task as `w` and takes it through review to completed. */
async function complete(tm: TaskManager, id: number): Promise<void> {
  const claim = (await tm.claimTask({ agent: 'w', taskId: id, start: true }))!;
  await tm.transitionTask({ taskId: id, to: 'review', actor: agent('w'), claimToken: claim.claimToken, then: [{ to: 'completed', actor: system }] });
}

describe('dependencies', () => {
  it('a task is not claimable until every dependency is completed', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    const b = (await tm.createTask({ title: 'b' }, operator)).task;
    const c = (await tm.createTask({ title: 'c', dependsOn: [b.id, a.id], priority: 10 }, operator)).task;
    expect(c.dependsOn).toEqual([a.id, b.id]);
    await expect(tm.claimTask({ agent: 'w', taskId: c.id })).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
    await complete(tm, a.id);
    expect((await tm.claimTask({ agent: 'x' }))!.id).toBe(b.id); // c, though higher priority, still waits for b
    const claimedB = (await tm.findTasks({ states: ['claimed'] }))[0]!;
    expect(claimedB.id).toBe(b.id);
  });

  it('completing the last dependency releases the dependent', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    const c = (await tm.createTask({ title: 'c', dependsOn: [a.id], priority: 10 }, operator)).task;
    await complete(tm, a.id);
    expect((await tm.claimTask({ agent: 'w' }))!.id).toBe(c.id);
  });

  it('a dependency that fails or is cancelled cancels its dependents, each with an event', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    const b = (await tm.createTask({ title: 'b', dependsOn: [a.id] }, operator)).task;
    const c = (await tm.createTask({ title: 'c', dependsOn: [b.id] }, operator)).task;
    await tm.cancelTask({ taskId: a.id, actor: operator, reason: 'not needed' });
    for (const id of [b.id, c.id]) {
      const t = await tm.getTask(id);
      expect(t.state).toBe('cancelled');
      expect(t.events.at(-1)).toMatchObject({ type: 'task.cancelled', actor: 'system', data: { from: 'pending', to: 'cancelled' } });
    }
  });

  it("a chain of 3,000 tasks an agent hangs under another's task does not keep that task from failing, being cancelled or being swept", async () => {
    // Cancelling dependents once recursed once per link: past ~2,500 links on SQLite the
    // stack overflowed, and the root's cancel, its worker's failure and the sweep's last
    // reclaim all threw and wrote nothing, every time; the sweep reclaims every stale task in
    // one transaction, so no other stale task was reclaimed either. Any agent can build one.
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const mallory = agent('mallory');
    const hang = async (root: number): Promise<number> => {
      let last = root;
      for (let i = 0; i < 3000; i += 500) {
        const batch = Array.from({ length: 500 }, (_, j) =>
          j === 0 ? { title: `link ${i}`, dependsOn: [last], ref: 'l0' } : { title: `link ${i + j}`, dependsOnRefs: [`l${j - 1}`], ref: `l${j}` },
        );
        last = (await tm.createTasks(batch, mallory)).at(-1)!.task.id;
      }
      return last;
    };
    const cancelled = (await tm.createTask({ title: 'cancelled by its operator' }, operator)).task;
    const failed = (await tm.createTask({ title: 'failed by its worker' }, operator)).task;
    const swept = (await tm.createTask({ title: 'its worker died on its last attempt', maxAttempts: 1 }, operator)).task;
    const bystander = (await tm.createTask({ title: 'stale beside it' }, operator)).task;
    const ends = [await hang(cancelled.id), await hang(failed.id), await hang(swept.id)];

    await tm.cancelTask({ taskId: cancelled.id, actor: operator, reason: 'not needed' });
    const claim = (await tm.claimTask({ agent: 'w', taskId: failed.id, start: true }))!;
    await tm.transitionTask({ taskId: failed.id, to: 'failed', actor: agent('w'), claimToken: claim.claimToken });
    await tm.claimTask({ agent: 'dead', taskId: swept.id, leaseMs: 1000, start: true });
    await tm.claimTask({ agent: 'dead', taskId: bystander.id, leaseMs: 1000, start: true });
    clock.advance(1001);
    expect(await tm.sweep({ graceMs: 0 })).toEqual({ marked: 2, requeued: [bystander.id], failed: [swept.id] });

    expect((await tm.stats()).byState).toMatchObject({ cancelled: 9001, failed: 2, pending: 1 });
    for (const end of ends) {
      expect((await tm.getTask(end)).events.at(-1)).toMatchObject({ type: 'task.cancelled', data: { reason: `dependency ${end - 1} ended cancelled` } });
    }
  }, 60_000);

  it('refuses a dependency that does not exist or can never complete, writing nothing', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    await tm.cancelTask({ taskId: a.id, actor: operator });
    const before = await tm.stats();
    await expect(tm.createTask({ title: 'x', dependsOn: [12345] }, operator)).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    await expect(tm.createTask({ title: 'x', dependsOn: [a.id] }, operator)).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(await tm.stats()).toEqual(before);
  });

  it('a batch creates a dependency graph atomically and refuses a cycle with DEPENDENCY_CYCLE', async () => {
    const tm = freshManager();
    const before = await tm.stats();
    await expect(
      tm.createTasks(
        [
          { ref: 'fetch', title: 'fetch' },
          { ref: 'parse', title: 'parse', dependsOnRefs: ['fetch', 'report'] },
          { ref: 'report', title: 'report', dependsOnRefs: ['parse'] },
        ],
        operator,
      ),
    ).rejects.toMatchObject({ code: 'DEPENDENCY_CYCLE', message: expect.stringContaining('parse -> report -> parse') });
    await expect(tm.createTasks([{ ref: 'self', title: 's', dependsOnRefs: ['self'] }], operator)).rejects.toMatchObject({
      code: 'DEPENDENCY_CYCLE',
    });
    expect(await tm.stats()).toEqual(before);

    const made = await tm.createTasks(
      [
        { ref: 'report', title: 'report', dependsOnRefs: ['parse'] },
        { ref: 'parse', title: 'parse', dependsOnRefs: ['fetch'] },
        { ref: 'fetch', title: 'fetch' },
      ],
      operator,
    );
    const [report, parse, fetch] = made.map((m) => m.task);
    expect(report!.dependsOn).toEqual([parse!.id]);
    expect(parse!.dependsOn).toEqual([fetch!.id]);
    const order: number[] = [];
    for (let i = 0; i < 3; i++) {
      const claim = (await tm.claimTask({ agent: 'w' }))!;
      order.push(claim.id);
      await tm.transitionTask({ taskId: claim.id, to: 'in_progress', actor: agent('w'), claimToken: claim.claimToken });
      await tm.transitionTask({ taskId: claim.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken, then: [{ to: 'completed', actor: system }] });
    }
    expect(order).toEqual([fetch!.id, parse!.id, report!.id]);
  });
});

describe('idempotent creation', () => {
  it('the same idempotency key returns the same task, never a second one', async () => {
    const tm = freshManager();
    const first = await tm.createTask({ title: 'once', idempotencyKey: 'order-42' }, operator);
    const second = await tm.createTask({ title: 'once again', idempotencyKey: 'order-42' }, operator);
    expect(first.created).toBe(true);
    expect(second).toEqual({ task: first.task, created: false });
    expect((await tm.stats()).byState.pending).toBe(1);
    expect((await tm.getTask(first.task.id)).events).toHaveLength(1);
  });

  it('holds across connections creating with the same key at once', async () => {
    const tm = freshManager();
    const { createTaskManager } = await import('../../src/engine/index.js');
    const { openTaskStore } = await import('../stores.js');
    const others = Array.from({ length: 3 }, () => createTaskManager({ store: openTaskStore(tm.path) }));
    try {
      const results = await Promise.all([tm, ...others].flatMap((m) => [m.createTask({ title: 'x', idempotencyKey: 'k' }, operator)]));
      expect(new Set(results.map((r) => r.task.id)).size).toBe(1);
      expect(results.filter((r) => r.created)).toHaveLength(1);
    } finally {
      await Promise.all(others.map((o) => o.close()));
    }
  });
});
