/**
 * getTask's event window (store.ts EventWindow) on both stores: the newest `last` events
 * below a cursor, in id order, over a task whose log mixes the task's own chain (claims,
 * moves) and its indexed events (a run's: run.started, run.step_finished …). Every window
 * must be the matching slice of the whole log, and paging back from the head must read
 * every event once.
 */
import { describe, expect, it } from 'vitest';
import { operator } from '../helpers.js';
import { card, drive, harness, loopContext } from '../workers/harness.js';

describe('a window on a task’s events', () => {
  it('is the slice of the whole log it names, for every size and cursor, and pages back through all of it', async () => {
    const h = harness();
    const script = [...Array.from({ length: 30 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `step ${i}` } })), { action: 'done' }];
    const parent = (await h.tm.createTask({ title: 'long', card: card({ allowed_tools: ['echo'], script, budget: { max_steps: 40 } }) }, operator)).task;
    const claim = (await h.tm.claimTask({ agent: 'worker', taskId: parent.id, start: true }))!;
    expect((await drive(loopContext(h, claim))).result.phase).toBe('completed');
    // Another task's events in between, so that a window cannot count on consecutive ids.
    await h.tm.createTask({ title: 'neighbour' }, operator);

    const all = (await h.tm.getTask(parent.id)).events.map((e) => e.id);
    const types = new Set((await h.tm.getTask(parent.id)).events.map((e) => e.type));
    expect(all.length).toBeGreaterThan(60);
    expect([...types]).toEqual(expect.arrayContaining(['task.created', 'task.claimed', 'run.started', 'run.step_finished', 'run.finished']));

    const cursors = [undefined, all[all.length - 1]!, all[all.length - 1]! + 1000, all[40]!, all[1]!, all[0]!];
    for (const beforeId of cursors) {
      for (const last of [1, 2, 7, 50, 1000]) {
        const got = (await h.tm.getTask(parent.id, { events: { last, beforeId } })).events.map((e) => e.id);
        const below = all.filter((id) => beforeId === undefined || id < beforeId);
        expect(got, `last ${last} before ${String(beforeId)}`).toEqual(below.slice(Math.max(0, below.length - last)));
      }
    }

    const paged: number[] = [];
    let before: number | undefined;
    for (;;) {
      const page = (await h.tm.getTask(parent.id, { events: { last: 9, beforeId: before } })).events.map((e) => e.id);
      paged.unshift(...page);
      if (page.length < 9) break;
      before = page[0];
    }
    expect(paged).toEqual(all);
  });

  it('refuses a window that is no window, with VALIDATION_FAILED', async () => {
    const h = harness();
    const { task } = await h.tm.createTask({ title: 't' }, operator);
    for (const events of [{ last: 0 }, { last: 1.5 }, { last: 1001 }, { last: 5, beforeId: 0 }, { last: 5, beforeId: -3 }, { last: 5, extra: 1 }]) {
      const err = await h.tm.getTask(task.id, { events: events as { last: number } }).then(() => null, (e: { code?: string }) => e);
      expect(err, JSON.stringify(events)).toMatchObject({ code: 'VALIDATION_FAILED' });
    }
  });
});
