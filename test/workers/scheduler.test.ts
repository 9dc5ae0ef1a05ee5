import { writeFileSync } from 'node:fs';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type ScheduleStore, createSqliteScheduleStore, createSqliteStore } from '../../src/engine/index.js';
import { runSchedulerTick } from '../../src/workers/scheduler.js';
import { codeOf, fakeClock, freshManager, operator, waitFor } from '../helpers.js';
import { execSql } from '../stores.js';
import { spawnCli } from '../cli/helpers.js';
import { daemonCard, startDaemonProcess } from './daemon-helpers.js';

const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1, 12, 0, 0);

/** Several schedulers, each on its own connection as separate daemons would be, sharing one clock. */
function daemons(path: string, n: number, now: () => number): ScheduleStore[] {
  return Array.from({ length: n }, () => {
    const store = createSqliteStore({ path, now });
    onTestFinished(() => store.close());
    return createSqliteScheduleStore(store);
  });
}

describe('the scheduler', () => {
  it('each fire time creates exactly one task however many daemons tick', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const [first, ...rest] = daemons(tm.path, 3, clock.now);
    await first!.addSchedule({ cron: '*/5 * * * *', title: 'every five', card: daemonCard() }, operator);
    for (let minute = 1; minute <= 20; minute++) {
      clock.advance(MINUTE);
      await Promise.all([first!, ...rest].map((d) => runSchedulerTick(d, clock.now())));
    }
    const tasks = await tm.findTasks();
    expect(tasks.map((t) => t.idempotencyKey)).toEqual(
      [5, 10, 15, 20].map((m) => `schedule:1:${new Date(T0 + m * MINUTE).toISOString()}`),
    );
  });

  it('fires missed while no daemon ran are skipped by default, one or all on request', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const [d] = daemons(tm.path, 1, clock.now);
    const skip = await d!.addSchedule({ cron: '0 * * * *', title: 'skip', card: daemonCard() }, operator);
    const one = await d!.addSchedule({ cron: '0 * * * *', title: 'one', card: daemonCard(), catchUp: 'one' }, operator);
    const all = await d!.addSchedule({ cron: '0 * * * *', title: 'all', card: daemonCard(), catchUp: 'all' }, operator);
    clock.advance(5 * 60 * MINUTE + 30_000); // five hourly fires missed; the last 30 s ago
    await runSchedulerTick(d!, clock.now());
    const count = async (title: string) => (await tm.findTasks()).filter((t) => t.title === title).length;
    expect([await count('skip'), await count('one'), await count('all')]).toEqual([0, 1, 5]);
    const newestMissed = new Date(T0 + 5 * 60 * MINUTE).toISOString();
    expect((await tm.findTasks()).find((t) => t.title === 'one')!.idempotencyKey).toBe(`schedule:${one.id}:${newestMissed}`);
    // After the catch-up, each schedule fires on time again.
    clock.set(T0 + 6 * 60 * MINUTE + 1000);
    await runSchedulerTick(d!, clock.now());
    expect([await count('skip'), await count('one'), await count('all')]).toEqual([1, 2, 6]);
    expect([skip.id, all.id]).toEqual([1, 3]);
  });

  it('a cron that never fires is refused; one stored anyway (before the check) fails alone, and the schedules after it still fire', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const [d] = daemons(tm.path, 1, clock.now);
    expect(await codeOf(d!.addSchedule({ cron: '0 0 30 2 *', title: 'never', card: daemonCard() }, operator))).toBe('VALIDATION_FAILED');
    const first = await d!.addSchedule({ cron: '0 * * * *', title: 'hourly', card: daemonCard() }, operator);
    await d!.addSchedule({ cron: '*/5 * * * *', title: 'five', card: daemonCard() }, operator);
    // The 30th of February, written past the port as a store made before the check holds it.
    await execSql(tm, 'UPDATE schedules SET cron = $1 WHERE id = $2', ['0 0 30 2 *', first.id]);
    clock.advance(5 * MINUTE + 1000);
    const tick = await runSchedulerTick(d!, clock.now());
    expect(tick.failed.map((f) => f.scheduleId)).toEqual([first.id]);
    expect(String(tick.failed[0]!.error)).toMatch(/No execution date/);
    expect((await tm.findTasks()).map((t) => t.title)).toEqual(['five']);
  });

  it('no-overlap skips a fire while the previous task of the schedule is unfinished', async () => {
    const clock = fakeClock(T0);
    const tm = freshManager({ clock });
    const [d] = daemons(tm.path, 1, clock.now);
    await d!.addSchedule({ cron: '* * * * *', title: 'tick', card: daemonCard(), overlap: false }, operator);
    clock.advance(MINUTE);
    expect((await runSchedulerTick(d!, clock.now())).created).toHaveLength(1);
    clock.advance(MINUTE);
    expect(await runSchedulerTick(d!, clock.now())).toEqual({ created: [], skipped: [T0 + 2 * MINUTE], failed: [] });
    const [first] = await tm.findTasks();
    await tm.cancelTask({ taskId: first!.id, actor: operator });
    clock.advance(MINUTE);
    expect((await runSchedulerTick(d!, clock.now())).created).toHaveLength(1);
  });

  it('real daemons on a per-second schedule create one task per fire time', async () => {
    const tm = freshManager();
    const cardFile = `${tm.path}.card.json`;
    writeFileSync(cardFile, JSON.stringify(daemonCard()));
    const added = await spawnCli(['--db', tm.path, '--json', 'schedule', 'add', '--cron', '* * * * * *', '--card', cardFile, '--title', 'pulse']);
    expect(added.code).toBe(0);
    const ds = await Promise.all([startDaemonProcess(tm.path), startDaemonProcess(tm.path)]);
    await waitFor(async () => (await tm.stats()).byState.completed >= 3, 20_000, 'three scheduled tasks to complete');
    await spawnCli(['--db', tm.path, 'schedule', 'remove', '1']);
    for (const d of ds) d.child.kill('SIGTERM');
    await Promise.all(ds.map((d) => d.exited));
    const keys = (await tm.findTasks({ limit: 1000 })).map((t) => t.idempotencyKey);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.every((k) => /^schedule:1:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/.test(k ?? ''))).toBe(true);
    const bad = await spawnCli(['--db', tm.path, 'schedule', 'add', '--cron', 'every day', '--card', cardFile]);
    expect(bad).toMatchObject({ code: 1 });
    expect(bad.stderr).toMatch(/^taskloop: VALIDATION_FAILED: cron: 'every day' is not a cron expression/);
  });
});
