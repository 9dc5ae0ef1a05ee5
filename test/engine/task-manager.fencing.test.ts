import { describe, expect, it } from 'vitest';
import { agent, fakeClock, freshManager, operator, system } from '../helpers.js';

describe('fencing and leases', () => {
  it('after a stale reclaim the old token is refused and the new owner’s work is intact', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 'fenced' }, operator);
    const old = (await tm.claimTask({ agent: 'w1', leaseMs: 1000, start: true }))!;
    clock.advance(1001);
    const swept = await tm.sweep({ graceMs: 0 });
    expect(swept.requeued).toEqual([task.id]);

    const fresh = (await tm.claimTask({ agent: 'w2', leaseMs: 60_000, start: true }))!;
    expect(fresh.id).toBe(task.id);
    expect(fresh.attempts).toBe(2);
    const before = await tm.getTask(task.id);

    await expect(tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w1'), claimToken: old.claimToken })).rejects.toMatchObject({
      code: 'STALE_CLAIM',
    });
    await expect(tm.heartbeat({ taskId: task.id, agent: 'w1', claimToken: old.claimToken })).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    // The same agent name on a second thread holds a different claim: still stale.
    await expect(tm.transitionTask({ taskId: task.id, to: 'failed', actor: agent('w2'), claimToken: old.claimToken })).rejects.toMatchObject({
      code: 'STALE_CLAIM',
    });
    expect(await tm.getTask(task.id)).toEqual(before);

    await tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w2'), claimToken: fresh.claimToken });
    const events = (await tm.getTask(task.id)).events.map((e) => `${e.type}:${e.data.to}`);
    expect(events).toEqual([
      'task.created:pending',
      'task.claimed:claimed',
      'task.transitioned:in_progress',
      'task.stale_reclaimed:pending',
      'task.claimed:claimed',
      'task.transitioned:in_progress',
      'task.transitioned:review',
    ]);
  });

  it('the assignee must present its claim token, and a stranger may not move the task', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 't' }, operator);
    const claim = (await tm.claimTask({ agent: 'w' }))!;
    await expect(tm.transitionTask({ taskId: claim.id, to: 'in_progress', actor: agent('w') })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
    });
    await expect(tm.transitionTask({ taskId: claim.id, to: 'in_progress', actor: agent('mallory') })).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    await expect(
      tm.transitionTask({ taskId: claim.id, to: 'in_progress', actor: agent('mallory'), claimToken: 'guessed-token' }),
    ).rejects.toMatchObject({ code: 'STALE_CLAIM' });
  });

  it('a heartbeat extends the lease from now, and a late heartbeat in the grace period saves the claim', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await tm.createTask({ title: 't' }, operator);
    const claim = (await tm.claimTask({ agent: 'w', leaseMs: 1000 }))!;
    clock.advance(800);
    const { leaseExpiresAt } = await tm.heartbeat({ taskId: claim.id, agent: 'w', claimToken: claim.claimToken });
    expect(leaseExpiresAt).toBe(clock.now() + 1000);

    clock.advance(1500); // lease ran out 500 ms ago
    expect(await tm.sweep({ graceMs: 2000 })).toEqual({ marked: 1, requeued: [], failed: [] });
    clock.advance(100);
    await tm.heartbeat({ taskId: claim.id, agent: 'w', claimToken: claim.claimToken }); // late, but alive
    clock.advance(2500);
    await tm.heartbeat({ taskId: claim.id, agent: 'w', claimToken: claim.claimToken });
    expect(await tm.sweep({ graceMs: 2000 })).toEqual({ marked: 0, requeued: [], failed: [] });
    expect((await tm.getTask(claim.id)).state).toBe('claimed');
  });

  it('the sweep reclaims only after a lease was seen expired for the grace period', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await tm.createTask({ title: 't' }, operator);
    const claim = (await tm.claimTask({ agent: 'w', leaseMs: 1000 }))!;
    clock.advance(1001);
    expect(await tm.sweep({ graceMs: 500 })).toEqual({ marked: 1, requeued: [], failed: [] });
    clock.advance(499);
    expect((await tm.sweep({ graceMs: 500 })).requeued).toEqual([]);
    clock.advance(1);
    expect((await tm.sweep({ graceMs: 500 })).requeued).toEqual([claim.id]);
    const reclaimed = await tm.getTask(claim.id);
    expect(reclaimed).toMatchObject({ state: 'pending', assignee: null, leaseExpiresAt: null });
    expect(reclaimed.events.at(-1)).toMatchObject({
      type: 'task.stale_reclaimed',
      actor: 'sweeper',
      data: { from: 'claimed', to: 'pending', previous_assignee: 'w', attempt: 1 },
    });
  });

  it('a task whose attempts are spent fails on its last expired lease', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 't', maxAttempts: 2 }, operator);
    for (let attempt = 1; attempt <= 2; attempt++) {
      await tm.claimTask({ agent: 'w', leaseMs: 1000, start: true });
      clock.advance(1001);
      await tm.sweep({ graceMs: 0 });
    }
    const failed = await tm.getTask(task.id);
    expect(failed.state).toBe('failed');
    expect(failed.events.at(-1)).toMatchObject({ type: 'task.stale_reclaimed', data: { from: 'in_progress', to: 'failed', attempt: 2 } });
  });

  it('review keeps the assignee on record, and only someone else decides it', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 't' }, agent('w'));
    const claim = (await tm.claimTask({ agent: 'w', start: true }))!;
    await tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken });
    await expect(tm.transitionTask({ taskId: task.id, to: 'completed', actor: agent('w'), claimToken: claim.claimToken })).rejects.toMatchObject({
      code: 'FORBIDDEN',
    });
    const rework = await tm.transitionTask({ taskId: task.id, to: 'in_progress', actor: system, reason: 'tests fail' });
    expect(rework.assignee).toBe('w');
    await tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w'), claimToken: claim.claimToken });
    expect((await tm.transitionTask({ taskId: task.id, to: 'completed', actor: operator })).state).toBe('completed');
  });
});
