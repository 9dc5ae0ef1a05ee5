/**
 * Attacks on createFollowHub: store errors, abort, listeners, a follower joining during the
 * hub's read.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { type TaskStore, createTaskManager } from '../../src/engine/index.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { operator, tempDir } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('follow hub, misc', () => {
  it('a read of the hub that fails surfaces to every waiting follower; a follower that joins afterwards works', async () => {
    const inner = openTaskStore(newDatabase(tempDir()));
    let fail = false;
    let reads = 0;
    const store: TaskStore = {
      ...inner,
      readEvents: async (q) => {
        reads++;
        if (fail) {
          fail = false;
          throw new Error('disk on fire');
        }
        return inner.readEvents(q);
      },
    };
    const tm = createTaskManager({ store });
    await tm.createTask({ title: 'before' }, operator);
    const from = await inner.lastEventId();
    const ac = new AbortController();
    const outcome = (name: string) =>
      (async () => {
        try {
          for await (const _ of tm.follow({ afterId: from, signal: ac.signal })) void name;
          return 'ended';
        } catch (err) {
          return (err as Error).message;
        }
      })();
    const a = outcome('a');
    const b = outcome('b');
    // Both wait in the hub once their first reads are over and no read has come for a while
    // (on a loaded machine, PostgreSQL's round trips can take longer than any fixed sleep).
    for (let last = -1; last !== reads || reads === 0; ) {
      last = reads;
      await sleep(100);
    }
    fail = true;
    await tm.createTask({ title: 'x' }, operator);
    expect(await Promise.race([Promise.all([a, b]), sleep(10_000).then(() => 'timeout')])).toEqual(['disk on fire', 'disk on fire']);
    const seen: number[] = [];
    const c = (async () => {
      for await (const e of tm.follow({ afterId: from, signal: ac.signal })) seen.push(e.id);
    })();
    await tm.createTask({ title: 'y' }, operator);
    for (let t = Date.now(); seen.length < 2 && Date.now() - t < 2000; ) await sleep(10);
    ac.abort();
    await c;
    expect(seen).toEqual((await inner.readEvents({ afterId: from })).map((e) => e.id));
    await tm.close();
  });

  it('a waiting follower ends promptly on abort, and its signal keeps at most one listener through many commits', async () => {
    const tm = createTaskManager({ store: openTaskStore(newDatabase(tempDir())) });
    const ac = new AbortController();
    let n = 0;
    let most = 0;
    const following = (async () => {
      for await (const _ of tm.follow({ afterId: 0, signal: ac.signal })) {
        n++;
        most = Math.max(most, getEventListeners(ac.signal, 'abort').length);
      }
    })();
    for (let i = 0; i < 100; i++) await tm.createTask({ title: `t${i}` }, operator);
    for (let t = Date.now(); n < 100 && Date.now() - t < 2000; ) await sleep(10);
    expect(n).toBe(100);
    expect(getEventListeners(ac.signal, 'abort').length).toBeLessThanOrEqual(1);
    expect(most).toBeLessThanOrEqual(1);
    const t0 = performance.now();
    ac.abort();
    await following;
    expect(performance.now() - t0).toBeLessThan(50);
    expect(getEventListeners(ac.signal, 'abort').length).toBe(0);
    await tm.close();
  });

  it('a follower that joins while the hub read is in flight, and every earlier follower leaving mid-read, lose nothing', async () => {
    const inner = openTaskStore(newDatabase(tempDir()));
    let delay = 0;
    const store: TaskStore = {
      ...inner,
      readEvents: async (q) => {
        const d = delay;
        if (d > 0) await sleep(d);
        return inner.readEvents(q);
      },
    };
    const tm = createTaskManager({ store });
    await tm.createTask({ title: 'before' }, operator);
    const from = await inner.lastEventId();
    const first = new AbortController();
    const a = (async () => {
      for await (const _ of tm.follow({ afterId: from, signal: first.signal }));
    })();
    await sleep(30);
    delay = 80;
    await tm.createTask({ title: 'one' }, operator); // the hub reads for 80 ms
    await sleep(10);
    first.abort(); // the only follower leaves mid-read
    await a;
    delay = 2;
    const ac = new AbortController();
    const seen: number[] = [];
    const b = (async () => {
      for await (const e of tm.follow({ afterId: from, signal: ac.signal })) seen.push(e.id);
    })();
    await tm.createTask({ title: 'two' }, operator);
    await sleep(150);
    await tm.createTask({ title: 'three' }, operator);
    const expected = (await inner.readEvents({ afterId: from })).map((e) => e.id);
    for (let t = Date.now(); seen.length < expected.length && Date.now() - t < 2000; ) await sleep(10);
    ac.abort();
    await b;
    expect(seen).toEqual(expected);
    await tm.close();
  });
});
