/**
 * Attacks on createFollowHub (src/engine/tail.ts): cursors a client made up, far ahead of the log, and a follower joining while a read is under way after every other left.
 */
import { describe, expect, it } from 'vitest';
import { type TaskStore, createTaskManager } from '../../src/engine/index.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { operator, tempDir } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const FAR = 999_999_999_999_999; // 15 digits: what GET /api/events accepts as a cursor

function collect(tm: ReturnType<typeof createTaskManager>, opts: { afterId?: number; taskId?: number }, signal: AbortSignal, slowMs = 0) {
  const ids: number[] = [];
  const done = (async () => {
    for await (const e of tm.follow({ ...opts, signal })) {
      ids.push(e.id);
      if (slowMs > 0) await sleep(slowMs); // an SSE write that waits for the socket
    }
  })();
  return { ids, done };
}

describe('follow hub', () => {
  it('a one-task follower with a cursor far ahead does not blind the whole-log followers of the same TaskManager', async () => {
    const store = openTaskStore(newDatabase(tempDir()));
    const tm = createTaskManager({ store });
    const mine = (await tm.createTask({ title: 'a task the hostile follower may read' }, operator)).task;
    const from = await store.lastEventId();
    const ac = new AbortController();
    // The board / the monitor: the whole log from now on.
    const board = collect(tm, { afterId: from }, ac.signal, 2);
    await sleep(50);
    // An agent: GET /api/events?task_id=<its task> with Last-Event-ID: 999999999999999.
    const hostile = collect(tm, { taskId: mine.id, afterId: FAR }, ac.signal);
    await sleep(50);
    for (let i = 0; i < 5; i++) {
      await tm.createTask({ title: `t${i}` }, operator);
      await sleep(20);
    }
    const expected = (await store.readEvents({ afterId: from, limit: 1000 })).map((e) => e.id);
    for (let t = Date.now(); board.ids.length < expected.length && Date.now() - t < 2000; ) await sleep(20);
    ac.abort();
    await Promise.all([board.done, hostile.done]);
    await tm.close();
    expect(hostile.ids).toEqual([]);
    expect(board.ids).toEqual(expected);
  });

  it('a whole-log follower that joins after a follower with a cursor far ahead still sees the new events', async () => {
    const store = openTaskStore(newDatabase(tempDir()));
    const tm = createTaskManager({ store });
    await tm.createTask({ title: 'before' }, operator);
    const ac = new AbortController();
    // First follower on this TaskManager, cursor ahead of the log (a stale Last-Event-ID, another database's id).
    const ahead = collect(tm, { afterId: FAR }, ac.signal);
    await sleep(50);
    const from = await store.lastEventId();
    const late = collect(tm, { afterId: from }, ac.signal);
    await sleep(50);
    await tm.createTask({ title: 'after' }, operator);
    const expected = (await store.readEvents({ afterId: from, limit: 1000 })).map((e) => e.id);
    for (let t = Date.now(); late.ids.length < expected.length && Date.now() - t < 2000; ) await sleep(20);
    ac.abort();
    await Promise.all([ahead.done, late.done]);
    await tm.close();
    expect(late.ids).toEqual(expected);
  });

  it('a one-task follower (what an agent may open) that joins after a follower with a cursor far ahead still sees its task', async () => {
    const store = openTaskStore(newDatabase(tempDir()));
    const tm = createTaskManager({ store });
    const task = (await tm.createTask({ title: 'followed' }, operator)).task;
    const ac = new AbortController();
    const ahead = collect(tm, { afterId: FAR }, ac.signal);
    await sleep(50);
    const from = await store.lastEventId();
    const one = collect(tm, { afterId: from, taskId: task.id }, ac.signal);
    await sleep(50);
    await tm.cancelTask({ taskId: task.id, actor: operator });
    const expected = (await store.readEvents({ afterId: from, taskId: task.id, limit: 1000 })).map((e) => e.id);
    expect(expected.length).toBe(1);
    for (let t = Date.now(); one.ids.length < expected.length && Date.now() - t < 2000; ) await sleep(20);
    ac.abort();
    await Promise.all([ahead.done, one.done]);
    await tm.close();
    expect(one.ids).toEqual(expected);
  });

  it('a follower that joins while a read of the hub is in flight after every follower left waits, instead of reading back to back', async () => {
    const inner = openTaskStore(newDatabase(tempDir()));
    let reads = 0;
    let hubDelay = 0;
    const store: TaskStore = {
      ...inner,
      readEvents: async (q) => {
        reads++;
        const d = hubDelay;
        hubDelay = 0;
        await sleep(d > 0 ? d : 1); // every read takes real time, as on PostgreSQL
        return inner.readEvents(q);
      },
    };
    const tm = createTaskManager({ store });
    await tm.createTask({ title: 'before' }, operator);
    const from = await inner.lastEventId();
    const first = new AbortController();
    const a = collect(tm, { afterId: from }, first.signal);
    await sleep(50); // a waits in the hub
    hubDelay = 200; // the hub's read of the next commit takes 200 ms
    await tm.createTask({ title: 'one' }, operator);
    await sleep(20);
    first.abort(); // the only follower leaves (an SSE client disconnects) during that read
    await a.done;
    const second = new AbortController();
    reads = 0;
    const b = collect(tm, { afterId: await inner.lastEventId() }, second.signal); // a new SSE client
    await sleep(150); // nothing is committed meanwhile
    const during = reads;
    second.abort();
    await b.done;
    await tm.close();
    // Caught up with nothing new: one read, maybe two; it read back to back instead.
    expect(during).toBeLessThan(10);
  });
});
