import { execFile } from 'node:child_process';
import { setMaxListeners } from 'node:events';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { type TaskEvent, createTaskManager } from '../../src/engine/index.js';
import { followEvents } from '../../src/engine/tail.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { ROOT, freshManager, operator, tempDir } from '../helpers.js';

const run = promisify(execFile);

describe('following the event log', () => {
  it('replays from a cursor, then wakes on a commit made by another process (file watch, not polling)', async () => {
    const seed = freshManager();
    await seed.createTask({ title: 'before' }, operator);
    // The fallback poll is set to an hour: only the change notification can wake the tail.
    const tm = createTaskManager({ store: openTaskStore(seed.path, { watchFallbackMs: 3_600_000 }) });
    const ac = new AbortController();
    const seen: TaskEvent[] = [];
    const following = (async () => {
      for await (const event of tm.follow({ signal: ac.signal })) {
        seen.push(event);
        if (seen.length === 2) ac.abort();
      }
    })();
    const { stdout } = await run(process.execPath, [join(ROOT, 'test/fixtures/create.mjs'), seed.path, 'from another process']);
    await following;
    await tm.close();
    expect(seen.map((e) => [e.type, e.taskId])).toEqual([
      ['task.created', 1],
      ['task.created', Number(stdout.trim())],
    ]);
  });

  it('follows one task only when asked, starting after the given cursor', async () => {
    const tm = freshManager();
    const a = (await tm.createTask({ title: 'a' }, operator)).task;
    await tm.createTask({ title: 'b' }, operator); // between a's events: must be filtered out
    await tm.cancelTask({ taskId: a.id, actor: operator });
    const ac = new AbortController();
    const seen: string[] = [];
    const first = (await tm.getTask(a.id)).events[0]!.id;
    const following = (async () => {
      for await (const e of tm.follow({ taskId: a.id, afterId: first, signal: ac.signal })) {
        seen.push(e.type);
        ac.abort();
      }
    })();
    await following;
    expect(seen).toEqual(['task.cancelled']);
  });

  it('followers in one process share their reads, and each still sees every event after its cursor once, in order', async () => {
    const store = openTaskStore(newDatabase(tempDir()));
    // readEvents calls, counted at the store the followers' TaskManager reads through.
    let reads = 0;
    const counting = { ...store, readEvents: (q: Parameters<typeof store.readEvents>[0]) => (reads++, store.readEvents(q)) };
    const tm = createTaskManager({ store: counting });
    await tm.createTask({ title: 'before the followers' }, operator);
    const from = await tm.store.lastEventId();
    const ac = new AbortController();
    setMaxListeners(40, ac.signal); // one signal ends all 19 followers
    const seen = new Map<string, number[]>();
    const follow = (name: string, opts: { afterId?: number; taskId?: number }, slow = false) => {
      const ids: number[] = [];
      seen.set(name, ids);
      return (async () => {
        for await (const e of tm.follow({ ...opts, signal: ac.signal })) {
          ids.push(e.id);
          if (slow) await new Promise((r) => setTimeout(r, 5));
        }
      })();
    };
    const target = (await tm.createTask({ title: 'followed alone' }, operator)).task;
    const followers = [
      ...Array.from({ length: 16 }, (_, i) => follow(`live ${i}`, { afterId: from })),
      follow('one task', { afterId: from, taskId: target.id }),
      follow('from the start', { afterId: 0 }),
      follow('slow', { afterId: from }, true),
    ];
    await new Promise((r) => setTimeout(r, 100));
    const readsBefore = reads;
    for (let i = 0; i < 30; i++) {
      await tm.createTask({ title: `t${i}` }, operator);
      if (i === 10) await tm.cancelTask({ taskId: target.id, actor: operator });
    }
    const all = (await store.readEvents({ afterId: 0, limit: 10_000 })).map((e) => e.id);
    const after = all.filter((id) => id > from);
    const ofTarget = (await store.getTask(target.id, true)).events.map((e) => e.id).filter((id) => id > from);
    const done = async () => [...seen].every(([name, ids]) => ids.length === (name === 'one task' ? ofTarget.length : name === 'from the start' ? all.length : after.length));
    for (let t = Date.now(); !(await done()) && Date.now() - t < 10_000; ) await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await Promise.all(followers);
    for (const [name, ids] of seen) expect(ids, name).toEqual(name === 'one task' ? ofTarget : name === 'from the start' ? all : after);
    // 19 followers of 31 commits: each reading for itself made ~200 reads here; shared, ~50.
    expect(reads - readsBefore).toBeLessThan(100);
    await tm.close();
  });

  it('followEvents is a lone follower of a store: it replays from its cursor and sees what another connection commits', async () => {
    const tm = freshManager();
    const first = (await tm.createTask({ title: 'before' }, operator)).task;
    const store = openTaskStore(tm.path);
    const ac = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const e of followEvents(store, { afterId: 0, signal: ac.signal })) {
        seen.push(e.taskId!);
        if (seen.length === 2) ac.abort();
      }
    })();
    const second = (await tm.createTask({ title: 'after' }, operator)).task;
    await following;
    await store.close();
    expect(seen).toEqual([first.id, second.id]);
  });
});

