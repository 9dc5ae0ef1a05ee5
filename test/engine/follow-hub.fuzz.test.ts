/**
 * Attacks on createFollowHub: random interleavings of joins, aborts, breaks, slow consumers,
 * small batches and one-task filters against a store whose reads take real (random) time.
 * One cursor in twenty is far ahead of the log (a Last-Event-ID a client made up).
 */
import { setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { type TaskEvent, type TaskStore, createTaskManager } from '../../src/engine/index.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { operator, tempDir } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

interface Record_ {
  name: string;
  afterId: number;
  taskId?: number;
  ids: TaskEvent[];
  ended: 'abort' | 'break' | 'end';
  error?: unknown;
}

async function fuzz(seed: number) {
  const rand = rng(seed);
  const inner = openTaskStore(newDatabase(tempDir()));
  let watches = 0;
  const store: TaskStore = {
    ...inner,
    readEvents: async (q) => {
      await sleep(Math.floor(rand() * 3));
      return inner.readEvents(q);
    },
    lastEventId: async () => {
      await sleep(Math.floor(rand() * 3));
      return inner.lastEventId();
    },
    watch: (fn, topic) => {
      watches++;
      const off = inner.watch(fn, topic);
      return () => {
        watches--;
        off();
      };
    },
  };
  const tm = createTaskManager({ store });
  const tasks: number[] = [];
  for (let i = 0; i < 5; i++) tasks.push((await tm.createTask({ title: `seed ${i}` }, operator)).task.id);
  const records: Record_[] = [];
  const running: Promise<void>[] = [];
  const finalAc = new AbortController();
  setMaxListeners(200, finalAc.signal);
  let writing = true;

  const spawn = async (n: number) => {
    const last = await inner.lastEventId();
    const afterId = rand() < 0.05 ? last + 1000 : rand() < 0.2 ? 0 : Math.floor(rand() * (last + 1));
    const taskId = rand() < 0.35 ? tasks[Math.floor(rand() * tasks.length)] : undefined;
    const batch = rand() < 0.3 ? 1 + Math.floor(rand() * 4) : undefined;
    const slow = rand() < 0.3 ? 1 + Math.floor(rand() * 3) : 0;
    const mode = rand();
    const own = new AbortController();
    const signal = AbortSignal.any([own.signal, finalAc.signal]);
    const rec: Record_ = { name: `f${n}`, afterId, ...(taskId === undefined ? {} : { taskId }), ids: [], ended: 'end' };
    records.push(rec);
    const breakAfter = mode < 0.15 ? Math.floor(rand() * 5) : Infinity;
    if (mode >= 0.15 && mode < 0.35) setTimeout(() => own.abort(), Math.floor(rand() * 400));
    running.push(
      (async () => {
        try {
          for await (const e of tm.follow({ afterId, taskId, batch, signal })) {
            rec.ids.push(e);
            if (rec.ids.length > breakAfter) {
              rec.ended = 'break';
              break;
            }
            if (slow > 0) await sleep(slow);
          }
          if (rec.ended !== 'break') rec.ended = own.signal.aborted ? 'abort' : 'end';
        } catch (err) {
          rec.error = err;
        }
      })(),
    );
  };

  const writer = (async () => {
    for (let i = 0; i < 120; i++) {
      const r = rand();
      if (r < 0.6) tasks.push((await tm.createTask({ title: `t${i}` }, operator)).task.id);
      else if (r < 0.8) {
        const batch = Array.from({ length: 1 + Math.floor(rand() * 6) }, (_, k) => ({ title: `b${i}.${k}` }));
        for (const r of await tm.createTasks(batch, operator)) tasks.push(r.task.id);
      } else {
        const id = tasks[Math.floor(rand() * tasks.length)]!;
        await tm.cancelTask({ taskId: id, actor: operator }).catch(() => undefined);
      }
      if (rand() < 0.7) await sleep(Math.floor(rand() * 8));
    }
    writing = false;
  })();
  let n = 0;
  while (writing) {
    await spawn(n++);
    await sleep(Math.floor(rand() * 15));
  }
  await writer;
  const all = await inner.readEvents({ afterId: 0, limit: 100_000 });
  const expectedOf = (r: Record_) => all.filter((e) => e.id > r.afterId && (r.taskId === undefined || e.taskId === r.taskId)).map((e) => e.id);
  const live = () => records.filter((r) => r.ended === 'end' && r.error === undefined);
  for (let t = Date.now(); Date.now() - t < 5000; ) {
    if (live().every((r) => r.ids.length >= expectedOf(r).length)) break;
    await sleep(20);
  }
  finalAc.abort();
  await Promise.race([Promise.all(running), sleep(3000).then(() => { throw new Error('followers did not end after the abort'); })]);
  await tm.close();
  const problems: string[] = [];
  for (const r of records) {
    const got = r.ids.map((e) => e.id);
    const exp = expectedOf(r);
    if (r.error !== undefined) problems.push(`${r.name}: error ${String(r.error)}`);
    const prefix = exp.slice(0, got.length);
    if (JSON.stringify(got) !== JSON.stringify(prefix)) problems.push(`${r.name} (after ${r.afterId}, task ${r.taskId}): got ${got.slice(0, 20)} expected prefix ${prefix.slice(0, 20)}`);
    else if (r.ended === 'end' && got.length !== exp.length) problems.push(`${r.name} (after ${r.afterId}, task ${r.taskId}): stalled at ${got.length}/${exp.length}`);
  }
  return { problems, followers: records.length, watches };
}

describe('follow hub fuzz', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]) {
    it(`seed ${seed}: every follower sees exactly its events after its cursor, in order; the hub lets go of the watch`, async () => {
      const { problems, followers, watches } = await fuzz(seed);
      expect(followers).toBeGreaterThan(10);
      expect(problems).toEqual([]);
      expect(watches).toBe(0);
    }, 20_000);
  }
});
