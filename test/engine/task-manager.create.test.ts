/**
 * A plain create (no key, no dependencies) on both stores: its row and its task.created
 * event agree on the time, and the event reads the same whichever path wrote it. On
 * PostgreSQL such a create is one statement that builds the event's text around the
 * database's clock (tasks.ts createOne): a title written to break out of that text must
 * stay a title.
 */
import { describe, expect, it } from 'vitest';
import type { TaskEvent } from '../../src/engine/index.js';
import { fakeClock, freshManager, operator } from '../helpers.js';

const createdOf = async (tm: ReturnType<typeof freshManager>, id: number): Promise<TaskEvent> => {
  const { events } = await tm.getTask(id);
  expect(events[0]!.type).toBe('task.created');
  return events[0]!;
};

describe('a plain create', () => {
  it('writes its row and its event at one time, the pinned clock’s; the published event is the stored one', async () => {
    const clock = fakeClock(Date.UTC(2026, 5, 1, 12));
    const tm = freshManager({ clock });
    const published: TaskEvent[] = [];
    tm.bus.on('*', (e) => published.push(e));
    const { task, created } = await tm.createTask({ title: 'plain', priority: 3, queue: 'mail' }, operator);
    expect(created).toBe(true);
    expect(task).toMatchObject({ state: 'pending', createdAt: clock.now(), updatedAt: clock.now(), runAfter: clock.now(), priority: 3, queue: 'mail' });
    const stored = await createdOf(tm, task.id);
    expect(stored).toMatchObject({ taskId: task.id, actor: 'operator', actorRole: 'operator', createdAt: clock.now() });
    expect(stored.data).toEqual({ title: 'plain', to: 'pending', priority: 3, queue: 'mail', depends_on: [], run_after: clock.now() });
    expect(Object.keys(stored.data)).toEqual(['title', 'to', 'priority', 'queue', 'depends_on', 'run_after']);
    expect(published).toEqual([stored]);
  });

  it('in the store’s own clock, the row’s times and the event’s are one reading; a later run_after is kept', async () => {
    const tm = freshManager();
    const before = Date.now();
    const { task } = await tm.createTask({ title: 'now' }, operator);
    const later = before + 3_600_000;
    const { task: deferred } = await tm.createTask({ title: 'later', runAfter: later }, operator);
    expect(task.runAfter).toBe(task.createdAt);
    expect(task.updatedAt).toBe(task.createdAt);
    // The database's clock on this machine: within a few seconds of ours.
    expect(Math.abs(task.createdAt - before)).toBeLessThan(5000);
    expect(await createdOf(tm, task.id)).toMatchObject({ createdAt: task.createdAt, data: { run_after: task.createdAt } });
    expect(deferred.runAfter).toBe(later);
    expect(await createdOf(tm, deferred.id)).toMatchObject({ createdAt: deferred.createdAt, data: { run_after: later } });
    expect(await tm.claimTask({ agent: 'w' })).toMatchObject({ id: task.id });
    expect(await tm.claimTask({ agent: 'w' })).toBeNull();
  });

  it('a title crafted to end the event’s text early stays a title: no key is added or replaced', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const hostile = [
      '","run_after":1,"to":"completed","x":"',
      '\\","run_after":1}',
      '"}',
      'sep \u2028 emoji \u{1F600} backslash \\ quote \" end',
      "'); DROP TABLE tasks; --",
    ];
    for (const title of hostile) {
      const { task } = await tm.createTask({ title }, operator);
      expect(task.title).toBe(title);
      const stored = await createdOf(tm, task.id);
      expect(stored.data).toEqual({ title, to: 'pending', priority: 0, queue: 'default', depends_on: [], run_after: clock.now() });
    }
    expect((await tm.findTasks({ states: ['pending'] })).length).toBe(hostile.length);
  });

  it('reads the same as a batch’s create and a keyed one (other paths of the store)', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task: one } = await tm.createTask({ title: 'same' }, operator);
    const batch = await tm.createTasks([{ title: 'same' }, { title: 'other' }], operator);
    const { task: keyed } = await tm.createTask({ title: 'same', idempotencyKey: 'k-1' }, operator);
    const shape = async (id: number) => {
      const e = await createdOf(tm, id);
      return { keys: Object.keys(e.data), data: e.data, createdAt: e.createdAt, actor: e.actor, actorRole: e.actorRole };
    };
    const expected = await shape(one.id);
    expect(await shape(batch[0]!.task.id)).toEqual(expected);
    expect(await shape(keyed.id)).toEqual(expected);
  });
});
