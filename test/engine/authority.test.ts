import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type Actor,
  type SqliteTaskStore,
  SYSTEM_ACTOR_NAMES,
  createSqliteRunStore,
  createSqliteScheduleStore,
} from '../../src/engine/index.js';
import { runSchedulerTick } from '../../src/workers/scheduler.js';
import { ROOT, agent, codeOf, fakeClock, freshManager, operator } from '../helpers.js';

describe('actors are (id, role)', () => {
  it('no agent may bear the operator’s or a system actor’s name, in any case or width; nothing is written', async () => {
    const tm = freshManager();
    const names = ['operator', 'Operator', 'OPERATOR', 'ｏｐｅｒａｔｏｒ', ...SYSTEM_ACTOR_NAMES, 'Sweeper', 'reviewer'];
    for (const id of names) {
      expect(await codeOf(tm.createTask({ title: 't' }, { id, role: 'agent' })), id).toBe('RESERVED_NAME');
      expect(await codeOf(tm.claimTask({ agent: id })), id).toBe('RESERVED_NAME');
    }
    const { task } = await tm.createTask({ title: 'by the operator' }, operator);
    expect(await codeOf(tm.cancelTask({ taskId: task.id, actor: { id: 'operator', role: 'agent' } }))).toBe('RESERVED_NAME');
    expect(await codeOf(tm.transitionTask({ taskId: task.id, to: 'cancelled', actor: { id: 'sweeper', role: 'reviewer' } }))).toBe('RESERVED_NAME');
    expect((await tm.stats()).lastEventId).toBe(1);
    expect((await tm.getTask(task.id)).state).toBe('pending');
  });

  it('a creator is its id and its role: an agent named like a reviewer who created a task may not cancel it', async () => {
    const tm = freshManager();
    const alice: Actor = { id: 'alice', role: 'reviewer' };
    const { task } = await tm.createTask({ title: 'by reviewer alice' }, alice);
    expect(await codeOf(tm.cancelTask({ taskId: task.id, actor: agent('alice') }))).toBe('FORBIDDEN');
    expect((await tm.getTask(task.id)).state).toBe('pending');
    const mine = await tm.createTask({ title: 'by agent alice' }, agent('alice'));
    await tm.cancelTask({ taskId: mine.task.id, actor: agent('alice') });
    expect((await tm.getTask(mine.task.id)).state).toBe('cancelled');
  });

  it('every event records its actor’s role next to its id, system moves included', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 't', maxAttempts: 1 }, operator);
    await tm.claimTask({ agent: 'worker', leaseMs: 1000 });
    clock.advance(2000);
    await tm.sweep({ graceMs: 0 });
    clock.advance(10);
    await tm.sweep({ graceMs: 0 });
    const events = (await tm.getTask(task.id)).events.map((e) => [e.type, e.actor, e.actorRole]);
    expect(events).toEqual([
      ['task.created', 'operator', 'operator'],
      ['task.claimed', 'worker', 'agent'],
      ['task.stale_reclaimed', 'sweeper', 'system'],
    ]);
  });
});

describe('one authority over state moves', () => {
  it('only the claim and the move writer assign a task’s state: no other adapter file writes tasks.state', () => {
    const dir = join(ROOT, 'src/engine/sqlite');
    const writers = readdirSync(dir)
      .filter((f) => f.endsWith('.ts'))
      .filter((f) => /UPDATE\s+tasks\s+SET[^;`]*\bstate\s*=/i.test(readFileSync(join(dir, f), 'utf8')));
    expect(writers.sort()).toEqual(['claim.ts', 'moves.ts']);
    // …and each of them asks the state machine.
    expect(readFileSync(join(dir, 'claim.ts'), 'utf8')).toMatch(/checkClaim\(/);
    expect(readFileSync(join(dir, 'moves.ts'), 'utf8')).toMatch(/checkMove\(/);
  });

  it('a system move the state machine has no row for is refused, even from inside the engine', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 't' }, operator);
    // pending -> failed has no mover at all, system included.
    expect(await codeOf(tm.transitionTask({ taskId: task.id, to: 'failed', actor: { id: 'acceptance', role: 'system' } }))).toBe('INVALID_TRANSITION');
    expect((await tm.getTask(task.id)).state).toBe('pending');
  });
});

describe('what a card may do depends on who wrote it', () => {
  const powered = [
    ['launch_allowlist', { goal: 'g', launch_allowlist: [['sh', '-c', 'touch /tmp/pwned']] }],
    ['an acceptance command', { goal: 'g', acceptance: { checks: [{ id: 'x', command: ['sh', '-c', 'touch /tmp/pwned'] }] } }],
  ] as const;
  for (const [what, card] of powered) {
    it(`an agent’s card with ${what} is refused at creation with FORBIDDEN, and nothing is written`, async () => {
      const tm = freshManager();
      expect(await codeOf(tm.createTask({ title: 't', card }, agent('mallory')))).toBe('FORBIDDEN');
      expect(await codeOf(tm.createTasks([{ title: 'ok' }, { title: 't', card }], agent('mallory')))).toBe('FORBIDDEN');
      expect(await codeOf(tm.createTask({ title: 't', card }, { id: 'rita', role: 'reviewer' }))).toBe('FORBIDDEN');
      expect((await tm.stats()).lastEventId).toBe(0);
      // An operator's card may carry it.
      expect((await tm.createTask({ title: 't', card }, operator)).created).toBe(true);
    });
  }

  it('an agent may not smuggle a powered card in through a schedule', async () => {
    const tm = freshManager();
    const schedules = createSqliteScheduleStore(tm.store as SqliteTaskStore);
    const card = { goal: 'g', launch_allowlist: [['xterm']] };
    expect(await codeOf(schedules.addSchedule({ cron: '* * * * *', title: 't', card }, agent('mallory')))).toBe('FORBIDDEN');
    expect(await schedules.listSchedules()).toEqual([]);
  });
});

describe('schedules', () => {
  it('an agent may not remove an operator’s schedule; its creator or an operator may', async () => {
    const tm = freshManager();
    const schedules = createSqliteScheduleStore(tm.store as SqliteTaskStore);
    const s = await schedules.addSchedule({ cron: '* * * * *', title: 'nightly', card: { goal: 'g' } }, operator);
    expect(await codeOf(schedules.removeSchedule(s.id, agent('mallory')))).toBe('FORBIDDEN');
    expect(await schedules.listSchedules()).toHaveLength(1);
    const mine = await schedules.addSchedule({ cron: '* * * * *', title: 'mine', card: { goal: 'g' } }, agent('mallory'));
    await schedules.removeSchedule(mine.id, agent('mallory'));
    await schedules.removeSchedule(s.id, operator);
    expect(await schedules.listSchedules()).toEqual([]);
  });
});

describe('idempotency keys are scoped', () => {
  it('one creator’s key never matches another creator’s task; the same creator gets its own task back', async () => {
    const tm = freshManager();
    const a = await tm.createTask({ title: 'a', idempotencyKey: 'k' }, agent('a'));
    const b = await tm.createTask({ title: 'b', idempotencyKey: 'k' }, agent('b'));
    const op = await tm.createTask({ title: 'op', idempotencyKey: 'k' }, operator);
    expect(new Set([a.task.id, b.task.id, op.task.id]).size).toBe(3);
    expect([a.created, b.created, op.created]).toEqual([true, true, true]);
    const again = await tm.createTask({ title: 'a again', idempotencyKey: 'k' }, agent('a'));
    expect(again).toMatchObject({ created: false, task: { id: a.task.id, title: 'a' } });
  });

  it('an agent that takes a schedule’s fire key first does not suppress the fire (a real scheduler tick)', async () => {
    const clock = fakeClock(Date.UTC(2026, 0, 1, 12, 0, 30));
    const tm = freshManager({ clock });
    const schedules = createSqliteScheduleStore(tm.store as SqliteTaskStore);
    const s = await schedules.addSchedule({ cron: '* * * * *', title: 'nightly', card: { goal: 'g' }, overlap: false }, operator);
    const fire = new Date(Date.UTC(2026, 0, 1, 12, 1, 0)).toISOString();
    const squat = await tm.createTask({ title: 'squat', idempotencyKey: `schedule:${s.id}:${fire}`, forAgent: 'nobody' }, agent('mallory'));
    clock.set(Date.UTC(2026, 0, 1, 12, 1, 1));
    const tick = await runSchedulerTick(schedules, clock.now());
    expect(tick.created).toHaveLength(1);
    expect(tick.created[0]).not.toBe(squat.task.id);
    const made = await tm.getTask(tick.created[0]!);
    expect(made).toMatchObject({ title: 'nightly', creator: 'operator', creatorRole: 'operator' });
    // The next fire is not skipped for overlap with the squatter's task either.
    await tm.cancelTask({ taskId: made.id, actor: operator });
    clock.set(Date.UTC(2026, 0, 1, 12, 2, 1));
    expect((await runSchedulerTick(schedules, clock.now())).created).toHaveLength(1);
  });
});

describe('approvals are decided by people who are not the agent', () => {
  it('the rule: an operator, or a reviewer who did not create the task; never an agent', async () => {
    const { mayDecideApproval } = await import('../../src/engine/authority.js');
    const byAgent = { id: 1, creator: 'claude', creatorRole: 'agent' as const, assignee: 'worker' };
    expect(mayDecideApproval(agent('claude'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval(agent('worker'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval(agent('someone-else'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval({ id: 'approval', role: 'system' }, byAgent, 1)).toMatchObject({ ok: false });
    expect(mayDecideApproval(operator, byAgent, 1)).toEqual({ ok: true });
    expect(mayDecideApproval({ id: 'rita', role: 'reviewer' }, byAgent, 1)).toEqual({ ok: true });
    const byRita = { ...byAgent, creator: 'rita', creatorRole: 'reviewer' as const };
    expect(mayDecideApproval({ id: 'rita', role: 'reviewer' }, byRita, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
  });
});

describe('event ids are never reused', () => {
  it('compacting the task that owns the newest event does not hand its id out again', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    const { task } = await tm.createTask({ title: 't' }, operator);
    await tm.cancelTask({ taskId: task.id, actor: operator }); // the newest event is this task's
    const seen = (await tm.stats()).lastEventId;
    clock.advance(1000);
    expect(await runs.compact(clock.now())).toBe(1);
    const { task: next } = await tm.createTask({ title: 'next' }, operator);
    const created = (await tm.getTask(next.id)).events[0]!;
    expect(created.id).toBeGreaterThan(seen);
    // A follower at the old cursor sees the compaction record and the new task's event.
    const after = await tm.store.readEvents({ afterId: seen });
    expect(after.map((e) => e.type)).toEqual(['retention.compacted', 'task.created']);
  });
});
