// The authority cases that need the run and schedule stores (on both stores: vitest.config.ts CONTRACT).
import { describe, expect, it } from 'vitest';
import { runSchedulerTick } from '../../src/workers/scheduler.js';
import { portsOf } from '../stores.js';
import { agent, codeOf, fakeClock, freshManager, operator } from '../helpers.js';

describe('what a card may do depends on who wrote it', () => {
  it('an agent may not smuggle a powered card in through a schedule', async () => {
    const tm = freshManager();
    const schedules = portsOf(tm).schedules;
    const card = { goal: 'g', launch_allowlist: [['xterm']] };
    expect(await codeOf(schedules.addSchedule({ cron: '* * * * *', title: 't', card }, agent('mallory')))).toBe('FORBIDDEN');
    expect(await schedules.listSchedules()).toEqual([]);
  });
});

describe('schedules', () => {
  it('an agent may not remove an operator’s schedule; its creator or an operator may', async () => {
    const tm = freshManager();
    const schedules = portsOf(tm).schedules;
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
  it('an agent that takes a schedule’s fire key first does not suppress the fire (a real scheduler tick)', async () => {
    const clock = fakeClock(Date.UTC(2026, 0, 1, 12, 0, 30));
    const tm = freshManager({ clock });
    const schedules = portsOf(tm).schedules;
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

describe('event ids are never reused', () => {
  it('compacting the task that owns the newest event does not hand its id out again', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const runs = portsOf(tm).runs;
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
