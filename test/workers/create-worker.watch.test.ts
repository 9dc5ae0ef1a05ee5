/**
 * createWorker's watches (create-worker.ts): the held tasks' watch hears every commit but runs
 * only while a handler holds a task, so it must not miss a cancel that commits between the
 * claim and its start, nor leave watches behind as it comes and goes. The store's
 * data_version poll is set to an hour and the lease to two minutes (the holder's beat, a third
 * of it, looks too): only the watch can hear the cancel in time.
 */
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { type SqliteTaskStore, createSqliteRunStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { createWorker } from '../../src/workers/create-worker.js';
import { operator, tempDir } from '../helpers.js';
import { inotifyInodes } from '../wake-helpers.js';

const open: SqliteTaskStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
function store(path: string): SqliteTaskStore {
  const s = createSqliteStore({ path, watchFallbackMs: 3_600_000 });
  open.push(s);
  return s;
}
const aborted = (signal: AbortSignal) => new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
async function until(what: string, check: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

describe('createWorker: the held tasks’ watch', () => {
  it('a cancel that commits right after the claim, before the watch starts, still aborts the handler', async () => {
    const path = join(tempDir(), 'tasks.db');
    const other = store(path);
    const s = store(path);
    const tm = createTaskManager({ store: s });
    // Another connection cancels the task just as the claim returns (the window between the
    // claim's commit and the watch's start, made certain).
    const claimTask = tm.claimTask.bind(tm);
    tm.claimTask = async (input) => {
      const t = await claimTask(input);
      if (t !== null) await other.transition({ taskId: t.id, to: 'cancelled', actor: operator });
      return t;
    };
    let signal: AbortSignal | undefined;
    const w = await createWorker({
      store: { tm, runs: createSqliteRunStore(s) } as never,
      queue: 'jobs',
      agent: 'w1',
      idleMs: 60_000,
      leaseMs: 120_000,
      handler: async (_t, ctx) => {
        signal = ctx.signal;
        await aborted(ctx.signal);
      },
    });
    onTestFinished(() => w.close(100));
    const { task } = await tm.createTask({ title: 'cancelled in the window', queue: 'jobs' }, operator);
    await until('the handler to start', () => signal !== undefined);
    expect((await tm.getTask(task.id)).state).toBe('cancelled');
    await until('the handler to be aborted', () => signal!.aborted);
  });

  it('coming and going with its tasks (concurrency 4, 40 tasks), it leaves no watch behind, and the folder watch ends', async () => {
    const path = join(tempDir(), 'tasks.db');
    const before = inotifyInodes().length;
    const s = store(path);
    const tm = createTaskManager({ store: s });
    let done = 0;
    const w = await createWorker({
      store: { tm, runs: createSqliteRunStore(s) } as never,
      queue: 'jobs',
      agent: 'w1',
      concurrency: 4,
      idleMs: 60_000,
      handler: async () => {
        await sleep(Math.random() * 5);
        done++;
      },
    });
    onTestFinished(() => w.close(100));
    for (let i = 0; i < 40; i++) await tm.createTask({ title: `t${i}`, queue: 'jobs' }, operator);
    await until('40 tasks done', () => done === 40, 10_000);
    await sleep(2500);
    const now = inotifyInodes();
    expect(now.filter((i) => i === statSync(dirname(path)).ino), 'the folder watch ended').toEqual([]);
    // The wake file of every queue and that of its queue's bucket.
    expect(now.length - before).toBeLessThanOrEqual(2);
  });
});
