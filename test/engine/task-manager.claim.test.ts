import { describe, expect, it } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { execSql, openTaskStore, querySql } from '../stores.js';
import { agent, fakeClock, freshManager, operator, system } from '../helpers.js';

describe('claiming', () => {
  it('hands out the highest priority first, then the oldest', async () => {
    const tm = freshManager();
    const low = await tm.createTask({ title: 'low', priority: 1 }, operator);
    const highOld = await tm.createTask({ title: 'high old', priority: 5 }, operator);
    const highNew = await tm.createTask({ title: 'high new', priority: 5 }, operator);
    const order = [];
    for (let i = 0; i < 3; i++) order.push((await tm.claimTask({ agent: 'w' }))!.id);
    expect(order).toEqual([highOld.task.id, highNew.task.id, low.task.id]);
    expect(await tm.claimTask({ agent: 'w' })).toBeNull();
  });

  it('gives a claim a fresh token, a lease measured from the claim, and a task.claimed event', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 't' }, operator);
    clock.advance(60_000);
    const claimed = (await tm.claimTask({ agent: 'w', leaseMs: 5000 }))!;
    expect(claimed).toMatchObject({ id: task.id, state: 'claimed', assignee: 'w', attempts: 1 });
    expect(claimed.claimToken).toMatch(/^[0-9a-f-]{36}$/);
    expect(claimed.leaseExpiresAt).toBe(clock.now() + 5000);
    const events = (await tm.getTask(task.id)).events.map((e) => e.type);
    expect(events).toEqual(['task.created', 'task.claimed']);
  });

  it('a second claimer never gets a task that is already claimed, across connections', async () => {
    const tm = freshManager();
    const other = createTaskManager({ store: openTaskStore(tm.path) });
    try {
      await tm.createTasks(Array.from({ length: 50 }, (_, i) => ({ title: `t${i}` })), operator);
      const claims = await Promise.all(
        Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? tm : other).claimTask({ agent: `w${i}` })),
      );
      const ids = claims.filter((c) => c !== null).map((c) => c!.id);
      expect(ids).toHaveLength(50);
      expect(new Set(ids).size).toBe(50);
    } finally {
      await other.close();
    }
  });

  it('routes by queue, by the agent a task is for, and by required capabilities', async () => {
    const tm = freshManager();
    const mail = await tm.createTask({ title: 'mail', queue: 'mail' }, operator);
    const forBob = await tm.createTask({ title: 'bob only', forAgent: 'bob' }, operator);
    const desktop = await tm.createTask({ title: 'needs desktop+gpu', requires: ['desktop', 'gpu'] }, operator);
    expect(await tm.claimTask({ agent: 'alice', capabilities: ['desktop'] })).toBeNull();
    expect((await tm.claimTask({ agent: 'alice', capabilities: ['gpu', 'desktop', 'x'] }))!.id).toBe(desktop.task.id);
    expect((await tm.claimTask({ agent: 'bob' }))!.id).toBe(forBob.task.id);
    expect(await tm.claimTask({ agent: 'bob' })).toBeNull();
    expect((await tm.claimTask({ agent: 'bob', queue: 'mail' }))!.id).toBe(mail.task.id);
  });

  it('explains why a named task cannot be claimed, and writes nothing', async () => {
    const tm = freshManager();
    const forBob = await tm.createTask({ title: 'bob only', forAgent: 'bob' }, operator);
    const before = await tm.stats();
    await expect(tm.claimTask({ agent: 'alice', taskId: forBob.task.id })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(tm.claimTask({ agent: 'alice', taskId: 999 })).rejects.toMatchObject({ code: 'TASK_NOT_FOUND' });
    expect(await tm.stats()).toEqual(before);
    await tm.claimTask({ agent: 'bob', taskId: forBob.task.id });
    await expect(tm.claimTask({ agent: 'bob', taskId: forBob.task.id })).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
  });

  it('does not hand out a delayed task before its run_after', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 'later', runAfter: clock.now() + 10_000 }, operator);
    expect(await tm.claimTask({ agent: 'w' })).toBeNull();
    await expect(tm.claimTask({ agent: 'w', taskId: task.id })).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
    clock.advance(10_000);
    expect((await tm.claimTask({ agent: 'w' }))!.id).toBe(task.id);
  });

  it('can claim and start in one transaction, writing both events', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 't' }, operator);
    const claimed = (await tm.claimTask({ agent: 'w', start: true }))!;
    expect(claimed.state).toBe('in_progress');
    const events = (await tm.getTask(task.id)).events;
    expect(events.map((e) => [e.type, e.data.to])).toEqual([
      ['task.created', 'pending'],
      ['task.claimed', 'claimed'],
      ['task.transitioned', 'in_progress'],
    ]);
    const done = await tm.transitionTask({
      taskId: task.id,
      to: 'review',
      actor: agent('w'),
      claimToken: claimed.claimToken,
      then: [{ to: 'completed', actor: system, result: { ok: true } }],
    });
    expect(done).toMatchObject({ state: 'completed', result: { ok: true }, leaseExpiresAt: null });
  });

  it('claimable says, with a read, whether a claim with the same filters would find a task, and changes nothing', async () => {
    const tm = freshManager();
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
    const { task } = await tm.createTask({ title: 'for b only', forAgent: 'b', queue: 'q' }, operator);
    expect(await tm.store.claimable({ agent: 'w', queue: 'q' })).toBe(false);
    expect(await tm.store.claimable({ agent: 'b' })).toBe(false);
    expect(await tm.store.claimable({ agent: 'b', queue: 'q' })).toBe(true);
    expect((await tm.getTask(task.id)).state).toBe('pending');
    await expect(tm.store.claimable({ agent: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect((await tm.claimTask({ agent: 'b', queue: 'q' }))?.id).toBe(task.id);
    expect(await tm.store.claimable({ agent: 'b', queue: 'q' })).toBe(false);
  });

  it('a claim of the next task writes what a claim of the same kind of task by its id writes: row, events (in order, ids and text), and what the bus is told', async () => {
    // On PostgreSQL the first is one statement written apart from takeClaim (claim.ts claimOne).
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const told: Array<{ id: number; type: string; data: string }> = [];
    tm.bus.on('*', (e) => told.push({ id: e.id, type: e.type, data: JSON.stringify(e.data) }));
    const seen = async (id: number) =>
      (await tm.getTask(id)).events.filter((e) => e.type !== 'task.created').map((e) => ({ id: e.id, type: e.type, data: JSON.stringify(e.data), actor: `${e.actorRole}:${e.actor}`, at: e.createdAt }));
    const shape = (t: Record<string, unknown>) => {
      const { id: _id, title: _title, priority: _priority, claimToken: _token, createdAt: _created, ...rest } = t;
      return rest;
    };
    for (const [start, workerId] of [[true, 'worker-7'], [false, undefined]] as const) {
      // Each task has been claimed once already and given back, so its attempt is the second
      // and its earlier worker id is on the row.
      const [a, b] = (await tm.createTasks([{ title: 'next' }, { title: 'named', priority: -1 }], operator)).map((r) => r.task);
      for (const t of [a!, b!]) {
        const first = (await tm.claimTask({ agent: 'earlier', taskId: t.id, workerId: 'worker-1' }))!;
        await tm.transitionTask({ taskId: t.id, to: 'pending', actor: agent('earlier'), claimToken: first.claimToken });
      }
      // A worker id left on a pending row (no port writes one): a claim without its own keeps it.
      await execSql(tm, "UPDATE tasks SET worker_id = 'worker-old' WHERE id IN ($1, $2)", [a!.id, b!.id]);
      clock.advance(1000);
      told.length = 0;
      const next = (await tm.claimTask({ agent: 'w', start, leaseMs: 7000, workerId }))!;
      const byId = (await tm.claimTask({ agent: 'w', taskId: b!.id, start, leaseMs: 7000, workerId }))!;
      expect(next.id).toBe(a!.id);
      expect(next).toMatchObject({ state: start ? 'in_progress' : 'claimed', assignee: 'w', attempts: 2, leaseExpiresAt: clock.now() + 7000, updatedAt: clock.now() });
      expect(next.claimToken).toMatch(/^[0-9a-f-]{36}$/);
      expect(next.claimToken).not.toBe(byId.claimToken);
      expect(shape(next as unknown as Record<string, unknown>)).toEqual(shape(byId as unknown as Record<string, unknown>));
      // A claim with a worker id writes it; one without keeps the row's.
      const workers = await querySql<{ worker_id: string | null }>(tm, 'SELECT worker_id FROM tasks WHERE id IN ($1, $2) ORDER BY id', [a!.id, b!.id]);
      expect(workers.map((r) => r.worker_id)).toEqual([workerId ?? 'worker-old', workerId ?? 'worker-old']);

      const [ofNext, ofById] = [await seen(a!.id), await seen(b!.id)];
      const strip = (es: typeof ofNext) => es.slice(-(start ? 2 : 1)).map(({ id: _id, ...e }) => e);
      expect(strip(ofNext)).toEqual(strip(ofById));
      expect(strip(ofNext)[0]).toEqual({ type: 'task.claimed', data: JSON.stringify({ from: 'pending', to: 'claimed', attempt: 2, lease_expires_at: clock.now() + 7000 }), actor: 'agent:w', at: clock.now() });
      // The bus was told each event once, with the id the log gave it, in order.
      const written = [...ofNext.slice(-(start ? 2 : 1)), ...ofById.slice(-(start ? 2 : 1))];
      expect(told.filter((e) => e.type !== 'task.created')).toEqual(written.map(({ id, type, data }) => ({ id, type, data })));
      expect(written.map((e) => e.id)).toEqual([...written.map((e) => e.id)].sort((x, y) => x - y));
      expect(new Set(written.map((e) => e.id)).size).toBe(written.length);
    }
  });
});
