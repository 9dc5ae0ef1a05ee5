/**
 * Attacks on createWorker's held-task watch (src/workers/worker-held.ts): one findTasks of the
 * agent's live claims per look, a held task missing from it read on its own.
 */
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { OPERATOR, type TaskloopStore, type WorkerOptions, createWorker, openStore } from '../../src/index.js';
import { tempDir } from '../helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined | false> | T | undefined | false, ms = 8_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

async function open(path: string): Promise<TaskloopStore> {
  const store = await openStore({ path });
  onTestFinished(() => store.close());
  return store;
}

/** A worker whose handlers wait until aborted (recording which) or released. */
async function holdingWorker(store: TaskloopStore, opts: Partial<WorkerOptions> & { agent: string }) {
  const aborted: number[] = [];
  const started: number[] = [];
  const slots = new Map<number, string>();
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  const worker = await createWorker({
    store,
    queue: 'jobs',
    log: () => undefined,
    concurrency: 4,
    ...opts,
    handler: async (t, ctx) => {
      started.push(t.id);
      slots.set(t.id, ctx.slotId);
      ctx.signal.addEventListener('abort', () => aborted.push(t.id));
      await Promise.race([released, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
      return { ok: true };
    },
  });
  onTestFinished(() => worker.close(100));
  return { worker, aborted, started, slots, release: () => release() };
}

describe('createWorker held-task watch', () => {
  it('more than 1000 live claims of the same agent name between two held tasks: a cancel of either aborts only it', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = await open(path);
    const low = (await store.tm.createTask({ title: 'low', queue: 'jobs' }, OPERATOR)).task;
    // getTask of the held-task watch, counted: the held task past the 1000 read is read on its own.
    const inner = store.tm.store;
    const singles: number[] = [];
    const counting = { ...inner, getTask: (id: number, withEvents: boolean) => (singles.push(id), inner.getTask(id, withEvents)) };
    const w = await holdingWorker({ ...store, tm: { ...store.tm, store: counting } }, { agent: 'w' });
    await until('low held', () => w.started.includes(low.id));
    // Another process with the same agent name holds 1001 claims with ids between.
    const other = await open(path);
    for (const n of [500, 501]) await other.tm.createTasks(Array.from({ length: n }, (_, i) => ({ title: `bulk ${i}`, queue: 'bulk' })), OPERATOR);
    for (let i = 0; i < 1001; i++) expect(await other.tm.claimTask({ agent: 'w', queue: 'bulk', leaseMs: 60_000 })).not.toBeNull();
    const high = (await store.tm.createTask({ title: 'high', queue: 'jobs' }, OPERATOR)).task;
    await until('high held', () => w.started.includes(high.id));
    // Commits elsewhere (cancelling one of the other process's claims) abort nothing of ours.
    const bulk = await store.tm.findTasks({ assignee: 'w', states: ['claimed'], queue: 'bulk', limit: 1 });
    await other.tm.cancelTask({ taskId: bulk[0]!.id, actor: OPERATOR });
    await sleep(100);
    expect(w.aborted).toEqual([]);
    await store.tm.cancelTask({ taskId: high.id, actor: OPERATOR });
    await until('high aborted', () => w.aborted.includes(high.id));
    expect(singles).toContain(high.id);
    expect(singles).not.toContain(low.id);
    await sleep(60);
    expect(w.aborted).toEqual([high.id]);
    await store.tm.cancelTask({ taskId: low.id, actor: OPERATOR });
    await until('low aborted', () => w.aborted.includes(low.id));
    expect(w.aborted).toEqual([high.id, low.id]);
  }, 20_000);

  it('a claim taken over by another process of the same agent name (lease ran out, new attempt) aborts the handler', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = await open(path);
    const task = (await store.tm.createTask({ title: 'slow', queue: 'jobs' }, OPERATOR)).task;
    const w = await holdingWorker(store, { agent: 'w', leaseMs: 300, concurrency: 1 });
    await until('held', () => w.started.includes(task.id));
    const other = await open(path);
    // Take the task away: the worker's slot lease let go, the sweep requeues it, the other process claims it as 'w'.
    await store.runs.expireSlot(w.slots.get(task.id)!);
    await until('requeued', async () => {
      await store.tm.sweep({ graceMs: 0 });
      return (await store.tm.getTask(task.id)).state === 'pending';
    });
    const again = await other.tm.claimTask({ agent: 'w', queue: 'jobs', taskId: task.id, leaseMs: 60_000, start: true });
    expect(again?.attempts).toBe(2);
    await until('aborted', () => w.aborted.includes(task.id));
  });

  it('two workers in one process under one agent name: a cancel aborts only its own handler, in whichever worker', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = await open(path);
    const tasks = [];
    for (let i = 0; i < 6; i++) tasks.push((await store.tm.createTask({ title: `t${i}`, queue: 'jobs' }, OPERATOR)).task);
    const a = await holdingWorker(store, { agent: 'w', concurrency: 3 });
    const b = await holdingWorker(store, { agent: 'w', concurrency: 3 });
    await until('all held', () => a.started.length + b.started.length === 6);
    for (const victim of [tasks[4]!, tasks[1]!]) {
      await store.tm.cancelTask({ taskId: victim.id, actor: OPERATOR });
      await until('victim aborted', () => [...a.aborted, ...b.aborted].includes(victim.id));
    }
    await sleep(100);
    expect([...a.aborted, ...b.aborted].sort((x, y) => x - y)).toEqual([tasks[1]!.id, tasks[4]!.id]);
    a.release();
    b.release();
    await until('the others completed', async () => (await store.tm.findTasks({ assignee: 'w', states: ['completed'] })).length === 4);
  });

  it('cancelled and at once re-created and re-claimed under the same agent name: the old handler is aborted, the new one not', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = await open(path);
    const first = (await store.tm.createTask({ title: 'same', queue: 'jobs' }, OPERATOR)).task;
    const w = await holdingWorker(store, { agent: 'w', concurrency: 2 });
    await until('held', () => w.started.includes(first.id));
    await sleep(25); // the next look may run at once
    await store.tm.cancelTask({ taskId: first.id, actor: OPERATOR });
    const second = (await store.tm.createTask({ title: 'same', queue: 'jobs' }, OPERATOR)).task;
    await until('second held', () => w.started.includes(second.id));
    await until('first aborted', () => w.aborted.includes(first.id));
    await sleep(60);
    expect(w.aborted).toEqual([first.id]);
  });
});

describe('createWorker held-task watch, a look slower than a handler', () => {
  it('a handler that returns while a look is under way is not aborted afterwards, nor logged as having lost its claim', async () => {
    const path = join(tempDir(), 'tasks.db');
    const store = await open(path);
    const task = (await store.tm.createTask({ title: 'quick', queue: 'jobs' }, OPERATOR)).task;
    const inner = store.tm.store;
    let armed = false;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    // findTasks with the latency of a network round trip (PostgreSQL), during which the handler returns.
    const slow = {
      ...inner,
      findTasks: async (q: Parameters<typeof inner.findTasks>[0]) => {
        if (armed && q.assignee === 'w') {
          armed = false;
          release();
          await until('completed', async () => (await inner.getTask(task.id, false)).state === 'completed');
        }
        return inner.findTasks(q);
      },
    };
    const lines: string[] = [];
    let abortedAfterReturn = false;
    let returned = false;
    const worker = await createWorker({
      store: { ...store, tm: { ...store.tm, store: slow } },
      queue: 'jobs',
      agent: 'w',
      log: (l) => lines.push(l),
      handler: async (_t, ctx) => {
        ctx.signal.addEventListener('abort', () => (abortedAfterReturn = returned));
        await released;
        returned = true;
        return { ok: true };
      },
    });
    onTestFinished(() => worker.close(100));
    await until('held', async () => (await inner.getTask(task.id, false)).state === 'in_progress');
    await sleep(30);
    armed = true;
    await store.tm.createTask({ title: 'a commit elsewhere', queue: 'other' }, OPERATOR); // a look
    await until('completed', async () => (await inner.getTask(task.id, false)).state === 'completed');
    await sleep(100);
    expect(lines.filter((l) => l.includes('claim lost'))).toEqual([]);
    expect(abortedAfterReturn).toBe(false);
  });
});
