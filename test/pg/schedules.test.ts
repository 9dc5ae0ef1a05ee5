/**
 * Schedules on PostgreSQL (postgres/schedules.ts): who may add and remove them, what a fire
 * creates, and the case SQLite never met: schedulers in several processes firing the same
 * schedule at once still create one task per fire time, and log one skip per skipped fire.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { TaskManager } from '../../src/engine/index.js';
import { createPgScheduleStore } from '../../src/engine/postgres/schedules.js';
import type { PgTaskStore } from '../../src/engine/postgres/task-store.js';
import { runSchedulerTick } from '../../src/workers/scheduler.js';
import { agent, codeOf, fakeClock, freshManager, operator } from '../helpers.js';
import { openTaskStore } from '../stores.js';

const pgOf = (tm: TaskManager) => tm.store as PgTaskStore;
const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1, 12, 0, 30);

async function eventsOf(tm: TaskManager, type: string): Promise<Array<{ actor: string; data: Record<string, unknown> }>> {
  const rows = await pgOf(tm).conn.query<{ actor: string; data: string }>('SELECT actor, data FROM task_events WHERE type = $1 ORDER BY id', [type]);
  return rows.map((r) => ({ actor: r.actor, data: JSON.parse(r.data) as Record<string, unknown> }));
}

/** Another store on the same database, closed when the test finishes. */
function another(url: string, now: () => number): PgTaskStore {
  const store = openTaskStore(url, { now }) as PgTaskStore;
  onTestFinished(() => store.close());
  return store;
}

describe('schedules on PostgreSQL', () => {
  it('adds, lists and removes schedules, with the authority SQLite enforces', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const schedules = createPgScheduleStore(pgOf(tm));
    // A card with powers is an operator's to write, even through a schedule.
    const powered = { goal: 'g', launch_allowlist: [['xterm']] };
    expect(await codeOf(schedules.addSchedule({ cron: '* * * * *', title: 't', card: powered }, agent('mallory')))).toBe('FORBIDDEN');
    expect(await schedules.listSchedules()).toEqual([]);

    const s = await schedules.addSchedule({ cron: '*/5 * * * *', title: 'nightly', card: { goal: 'g' }, queue: 'q', catchUp: 'one', overlap: false }, operator);
    expect(s).toEqual({
      id: s.id,
      cron: '*/5 * * * *',
      title: 'nightly',
      card: { goal: 'g' },
      queue: 'q',
      catchUp: 'one',
      overlap: false,
      creator: 'operator',
      creatorRole: 'operator',
      lastFireAt: T0,
      lastTaskId: null,
      createdAt: T0,
    });
    const mine = await schedules.addSchedule({ cron: '* * * * *', title: 'mine', card: { goal: 'g' } }, agent('mallory'));
    expect(mine).toMatchObject({ queue: 'default', catchUp: 'skip', overlap: true, creatorRole: 'agent' });
    expect((await schedules.listSchedules()).map((x) => x.id)).toEqual([s.id, mine.id]);

    expect(await codeOf(schedules.removeSchedule(s.id, agent('mallory')))).toBe('FORBIDDEN');
    await schedules.removeSchedule(mine.id, agent('mallory'));
    await schedules.removeSchedule(s.id, operator);
    expect(await schedules.listSchedules()).toEqual([]);
    expect(await codeOf(schedules.removeSchedule(s.id, operator))).toBe('VALIDATION_FAILED');
    expect(await eventsOf(tm, 'schedule.added')).toEqual([
      { actor: 'operator', data: { schedule_id: s.id, cron: '*/5 * * * *' } },
      { actor: 'mallory', data: { schedule_id: mine.id, cron: '* * * * *' } },
    ]);
    expect((await eventsOf(tm, 'schedule.removed')).map((e) => e.actor)).toEqual(['mallory', 'operator']);
  });

  it('a fire creates one task per fire time as the schedule’s creator, moves the cursor, and skips an overlapping fire', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const schedules = createPgScheduleStore(pgOf(tm));
    const s = await schedules.addSchedule({ cron: '* * * * *', title: 'tick', card: { goal: 'g' }, queue: 'q' }, agent('ann'));
    const [f1, f2, f3] = [T0 + 30_000, T0 + 30_000 + MINUTE, T0 + 30_000 + 2 * MINUTE];
    const fired = await schedules.fireSchedule(s.id, [f2, f1], f2);
    expect(fired.created).toHaveLength(2);
    expect(fired.skipped).toEqual([]);
    const made = await Promise.all(fired.created.map((id) => tm.getTask(id)));
    expect(made.map((t) => t.idempotencyKey)).toEqual([`schedule:${s.id}:${new Date(f1).toISOString()}`, `schedule:${s.id}:${new Date(f2).toISOString()}`]);
    expect(made[0]).toMatchObject({ title: 'tick', queue: 'q', creator: 'ann', creatorRole: 'agent', card: { goal: 'g' } });
    expect((await schedules.listSchedules())[0]).toMatchObject({ lastFireAt: f2, lastTaskId: fired.created[1] });
    // Handled fire times are not fired again; the cursor never moves back.
    expect(await schedules.fireSchedule(s.id, [f1, f2], f1)).toEqual({ created: [], skipped: [] });
    expect((await schedules.listSchedules())[0]!.lastFireAt).toBe(f2);
    // The key is the scheduler's: the creator's own task under it does not suppress the fire.
    await tm.createTask({ title: 'squat', idempotencyKey: `schedule:${s.id}:${new Date(f3).toISOString()}` }, agent('ann'));
    expect((await schedules.fireSchedule(s.id, [f3], f3)).created).toHaveLength(1);

    const once = await schedules.addSchedule({ cron: '* * * * *', title: 'once', card: { goal: 'g' }, overlap: false }, operator);
    const first = await schedules.fireSchedule(once.id, [f1], f1);
    expect(await schedules.fireSchedule(once.id, [f2], f2)).toEqual({ created: [], skipped: [f2] });
    expect(await eventsOf(tm, 'schedule.skipped')).toEqual([
      { actor: 'scheduler', data: { schedule_id: once.id, fire_time: new Date(f2).toISOString(), reason: `task ${first.created[0]} is still pending` } },
    ]);
    await tm.cancelTask({ taskId: first.created[0]!, actor: operator });
    expect((await schedules.fireSchedule(once.id, [f3], f3)).created).toHaveLength(1);
    // A schedule removed meanwhile fires nothing.
    await schedules.removeSchedule(once.id, operator);
    expect(await schedules.fireSchedule(once.id, [f3 + MINUTE], f3 + MINUTE)).toEqual({ created: [], skipped: [] });
  });

  it('a real scheduler tick fires a due schedule on PostgreSQL', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const schedules = createPgScheduleStore(pgOf(tm));
    await schedules.addSchedule({ cron: '* * * * *', title: 'nightly', card: { goal: 'g' } }, operator);
    clock.set(T0 + 31_000);
    const tick = await runSchedulerTick(schedules, clock.now());
    expect(tick.created).toHaveLength(1);
    expect((await runSchedulerTick(schedules, clock.now())).created).toEqual([]);
  });

  it('two schedulers firing the same schedule at once: the second waits for the first and creates nothing', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const s = await createPgScheduleStore(pgOf(tm)).addSchedule({ cron: '* * * * *', title: 'tick', card: { goal: 'g' }, overlap: false }, operator);
    const [a, b] = [another(tm.path, clock.now), another(tm.path, clock.now)];
    const fires = [T0 + 30_000, T0 + 30_000 + MINUTE];
    // The first fire holds the schedule's row until the second is seen waiting for it.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let taken!: () => void;
    const locked = new Promise<void>((r) => (taken = r));
    const first = a.write('hold', async (q) => {
      await q('SELECT id FROM schedules WHERE id = $1 FOR UPDATE', [s.id]);
      taken();
      return held;
    });
    await locked;
    const fireA = createPgScheduleStore(a).fireSchedule(s.id, fires, fires[1]!);
    const fireB = createPgScheduleStore(b).fireSchedule(s.id, fires, fires[1]!);
    // Both fires wait on the row; one goes first when the hold ends, the other after it.
    let waiting = 0;
    for (let i = 0; i < 500 && waiting < 2; i++) {
      const [{ n }] = (await pgOf(tm).conn.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'SELECT * FROM schedules WHERE id = $1 FOR UPDATE%' AND backend_xid IS NULL",
      )) as [{ n: number }];
      waiting = n;
      if (n < 2) await new Promise((r) => setTimeout(r, 10));
    }
    release();
    await first;
    expect(waiting).toBe(2);
    const results = await Promise.all([fireA, fireB]);
    // One fire creates the first task and skips the second fire time (overlap: false);
    // the other finds the cursor moved and does nothing at all.
    expect(results.flatMap((r) => r.created)).toHaveLength(1);
    expect(results.flatMap((r) => r.skipped)).toEqual([fires[1]]);
    expect(results.filter((r) => r.created.length === 0 && r.skipped.length === 0)).toHaveLength(1);
    expect(await eventsOf(tm, 'schedule.skipped')).toHaveLength(1);
    expect((await tm.stats()).byState.pending).toBe(1);
  });

  it('racing freely: 2 stores firing 10 schedules at once create one task per fire', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const add = createPgScheduleStore(pgOf(tm));
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push((await add.addSchedule({ cron: '* * * * *', title: `s${i}`, card: { goal: 'g' } }, operator)).id);
    const stores = [another(tm.path, clock.now), another(tm.path, clock.now)].map(createPgScheduleStore);
    const fires = [T0 + 30_000, T0 + 30_000 + MINUTE];
    const results = await Promise.all(ids.flatMap((id) => stores.map((st) => st.fireSchedule(id, fires, fires[1]!))));
    expect(results.flatMap((r) => r.created)).toHaveLength(20);
    expect((await tm.stats()).byState.pending).toBe(20);
    for (const s of await add.listSchedules()) expect(s.lastFireAt).toBe(fires[1]);
  });
});
