/**
 * Attacks on createFollowHub on PostgreSQL: writers on other connections commit out of id
 * order (ids are handed out before commit); followers of one TaskManager join at staggered
 * times (whole log and one task, cursors from lastEventId), some slow, some small batches.
 */
import { setMaxListeners } from 'node:events';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { operator, tempDir } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('follow hub on PostgreSQL', () => {
  it('followers joining while 4 connections commit out of order each see exactly their events, in order', async () => {
    const path = newDatabase(tempDir());
    const store = openTaskStore(path);
    const tm = createTaskManager({ store });
    onTestFinished(() => tm.close());
    const ids: number[] = [];
    for (let i = 0; i < 10; i++) ids.push((await tm.createTask({ title: `seed ${i}` }, operator)).task.id);
    const writers = Array.from({ length: 4 }, () => createTaskManager({ store: openTaskStore(path) }));
    for (const w of writers) onTestFinished(() => w.close());
    const ac = new AbortController();
    setMaxListeners(100, ac.signal);
    const followers: Array<{ after: number; taskId?: number; seen: number[]; done: Promise<void> }> = [];
    const join = async (i: number) => {
      const after = await tm.store.lastEventId();
      const taskId = i % 3 === 0 ? ids[i % ids.length] : undefined;
      const seen: number[] = [];
      const done = (async () => {
        for await (const e of tm.follow({ afterId: after, taskId, batch: i % 4 === 1 ? 2 : undefined, signal: ac.signal })) {
          seen.push(e.id);
          if (i % 5 === 2) await sleep(2);
        }
      })();
      followers.push({ after, taskId, seen, done });
    };
    let writing = true;
    const writes = Promise.all(
      writers.map(async (w, k) => {
        for (let i = 0; i < 60; i++) {
          if (i % 7 === k) await w.cancelTask({ taskId: ids[(i + k) % ids.length]!, actor: operator }).catch(() => undefined);
          else await w.createTask({ title: `w${k}.${i}` }, operator);
        }
      }),
    ).finally(() => (writing = false));
    for (let i = 0; writing; i++) {
      await join(i);
      await sleep(15);
    }
    await writes;
    const all = await tm.store.readEvents({ afterId: 0, limit: 100_000 });
    const expectedOf = (f: (typeof followers)[number]) => all.filter((e) => e.id > f.after && (f.taskId === undefined || e.taskId === f.taskId)).map((e) => e.id);
    for (let t = Date.now(); Date.now() - t < 8000 && !followers.every((f) => f.seen.length >= expectedOf(f).length); ) await sleep(20);
    ac.abort();
    await Promise.all(followers.map((f) => f.done));
    expect(followers.length).toBeGreaterThan(5);
    for (const [i, f] of followers.entries()) expect(f.seen, `follower ${i} (after ${f.after}, task ${f.taskId})`).toEqual(expectedOf(f));
  }, 30_000);
});
