import { join } from 'node:path';
import { onTestFinished, describe, expect, it } from 'vitest';
import { type ClaimedTask, OPERATOR, type TaskloopStore, type WorkerOptions, createTaskManager, createWorker, isEngineError, openStore } from '../../src/index.js';
import { tempDir } from '../helpers.js';

async function fresh(): Promise<TaskloopStore> {
  const store = await openStore({ path: join(tempDir(), 'tasks.db') });
  onTestFinished(() => store.close());
  return store;
}

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function start(store: TaskloopStore, opts: Omit<WorkerOptions, 'store' | 'queue'> & { queue?: string }) {
  const lines: string[] = [];
  const worker = await createWorker({ store, queue: 'jobs', log: (l) => lines.push(l), ...opts });
  onTestFinished(() => worker.close(100));
  return { worker, lines };
}

const create = async (store: TaskloopStore, title: string, extra: { queue?: string; maxAttempts?: number } = {}) =>
  (await store.tm.createTask({ title, queue: 'jobs', ...extra }, OPERATOR)).task;

describe('createWorker', () => {
  it('runs the tasks of its queue, at most `concurrency` at once, and completes each with the handler result', async () => {
    const store = await fresh();
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create(store, `job ${i}`)).id);
    const other = await create(store, 'not mine', { queue: 'elsewhere' });
    let running = 0;
    let most = 0;
    await start(store, {
      agent: 'w1',
      concurrency: 2,
      handler: async (task) => {
        most = Math.max(most, ++running);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        return { title: task.title };
      },
    });
    await until('all completed', async () => (await Promise.all(ids.map((id) => store.tm.getTask(id)))).every((t) => t.state === 'completed'));
    expect(most).toBe(2);
    for (const id of ids) {
      const task = await store.tm.getTask(id);
      expect(task.result).toEqual({ title: task.title });
      expect(task.events.map((e) => `${e.type}:${String(e.data.to)}:${e.actor}`)).toEqual([
        'task.created:pending:operator',
        'task.claimed:claimed:w1',
        'task.transitioned:in_progress:w1',
        'task.transitioned:review:w1',
        'task.transitioned:completed:acceptance',
      ]);
    }
    expect((await store.tm.getTask(other.id)).state).toBe('pending');
  });

  it("finish: 'review' leaves the task in review for a person", async () => {
    const store = await fresh();
    const task = await create(store, 'check me');
    await start(store, { agent: 'w1', finish: 'review', handler: () => ({ draft: true }) });
    const done = await until('review', async () => ((await store.tm.getTask(task.id)).state === 'review' ? store.tm.getTask(task.id) : undefined));
    expect(done.result).toEqual({ draft: true });
  });

  it('a handler that throws requeues the task while attempts remain, then fails it, naming the error', async () => {
    const store = await fresh();
    const task = await create(store, 'flaky', { maxAttempts: 2 });
    let calls = 0;
    await start(store, {
      agent: 'w1',
      handler: () => {
        calls++;
        // A tab and an escape sequence in the message: a reason holds no control character, so
        // they are written escaped (as they are, the move would be refused and the task stay held).
        throw new Error(`boom ${calls}\t\u001b[31m\nstack line that must not reach the reason`);
      },
    });
    const failed = await until('failed', async () => ((await store.tm.getTask(task.id)).state === 'failed' ? store.tm.getTask(task.id) : undefined));
    expect(calls).toBe(2);
    const moves = failed.events.filter((e) => e.type === 'task.transitioned' && (e.data.to === 'pending' || e.data.to === 'failed')).map((e) => [e.data.to, e.actor, e.data.reason]);
    expect(moves).toEqual([
      ['pending', 'daemon', 'handler failed: boom 1\\t\\u001b[31m (attempt 1 of 2; requeued)'],
      ['failed', 'w1', 'handler failed: boom 2\\t\\u001b[31m (attempt 2 of 2)'],
    ]);
    expect(failed.result).toBeNull();
  });

  it('a lost claim aborts the handler, and its result is refused (STALE_CLAIM) and never written', async () => {
    const store = await fresh();
    const task = await create(store, 'slow');
    let seen: ClaimedTask | undefined;
    let slotId: string | undefined;
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let abortedWith: unknown;
    const { worker, lines } = await start(store, {
      agent: 'w1',
      leaseMs: 300,
      handler: async (t, ctx) => {
        seen = t;
        slotId = ctx.slotId;
        ctx.signal.addEventListener('abort', () => (abortedWith = ctx.signal.reason));
        await released;
        return { late: true };
      },
    });
    await until('claimed', async () => seen);
    // The task is taken away: its slot's lease let go and the sweep returns it; another agent claims it.
    expect(slotId).toMatch(new RegExp(`^${worker.id}/\\d+$`));
    await store.runs.expireSlot(slotId!);
    await until('reclaimed', async () => {
      await store.tm.sweep({ graceMs: 0 });
      return (await store.tm.getTask(task.id)).state === 'pending';
    });
    const other = await store.tm.claimTask({ agent: 'other', queue: 'jobs', taskId: task.id });
    expect(other?.id).toBe(task.id);
    await until('abort', async () => abortedWith);
    expect(isEngineError(abortedWith) && abortedWith.code).toBe('STALE_CLAIM');
    release();
    await until('the refusal logged', async () => lines.some((l) => l.includes('STALE_CLAIM')));
    const now = await store.tm.getTask(task.id);
    expect(now).toMatchObject({ state: 'claimed', assignee: 'other', result: null });
    expect(now.events.filter((e) => e.actor === 'w1' && e.type === 'task.transitioned' && e.data.to !== 'in_progress')).toEqual([]);
    // The old token is refused outright, too.
    await expect(store.tm.transitionTask({ taskId: task.id, to: 'in_progress', actor: { id: 'w1', role: 'agent' }, claimToken: seen!.claimToken })).rejects.toMatchObject({ code: 'STALE_CLAIM' });
  });

  it('an operator cancelling a task aborts its handler within a beat', async () => {
    const store = await fresh();
    const task = await create(store, 'to cancel');
    let aborted = false;
    await start(store, {
      agent: 'w1',
      handler: (_t, ctx) => new Promise((resolve) => ctx.signal.addEventListener('abort', () => {
        aborted = true;
        resolve({ never: 'written' });
      })),
    });
    await until('in progress', async () => (await store.tm.getTask(task.id)).state === 'in_progress');
    await store.tm.cancelTask({ taskId: task.id, actor: OPERATOR, reason: 'not needed' });
    await until('aborted', async () => aborted);
    expect(await store.tm.getTask(task.id)).toMatchObject({ state: 'cancelled', result: null });
  });

  it('with 32 handlers, a commit elsewhere costs one read of the held claims, not one per handler; a cancel aborts only its own', async () => {
    const store = await fresh();
    const tasks = await Promise.all(Array.from({ length: 32 }, (_, i) => create(store, `held ${i}`)));
    // Reads of the worker's held-task watch, counted at the store.
    const reads = { getTask: 0, findTasks: 0 };
    const inner = store.tm.store;
    const counting = {
      ...inner,
      getTask: (id: number, withEvents: boolean) => (reads.getTask++, inner.getTask(id, withEvents)),
      findTasks: (q: Parameters<typeof inner.findTasks>[0]) => (reads.findTasks++, inner.findTasks(q)),
    };
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    const aborted: number[] = [];
    await start({ ...store, tm: { ...store.tm, store: counting } }, {
      agent: 'w32',
      concurrency: 32,
      handler: async (t, ctx) => {
        ctx.signal.addEventListener('abort', () => aborted.push(t.id));
        await Promise.race([released, new Promise((r) => ctx.signal.addEventListener('abort', r))]);
        return { ok: true };
      },
    });
    await until('32 held', async () => (await store.tm.findTasks({ assignee: 'w32', states: ['in_progress'] })).length === 32);
    reads.getTask = 0;
    reads.findTasks = 0;
    for (let i = 0; i < 40; i++) await store.tm.createTask({ title: `elsewhere ${i}`, queue: 'other' }, OPERATOR);
    await new Promise((r) => setTimeout(r, 100));
    // Every held task was among the claims read at once (one by one, each look read 32).
    expect(reads.getTask).toBe(0);
    expect(reads.findTasks).toBeGreaterThan(0);
    expect(reads.findTasks).toBeLessThan(40);
    const victim = tasks[17]!;
    await store.tm.cancelTask({ taskId: victim.id, actor: OPERATOR, reason: 'not needed' });
    await until('the cancelled one aborted', async () => aborted.includes(victim.id));
    await new Promise((r) => setTimeout(r, 100));
    expect(aborted).toEqual([victim.id]);
    release();
    await until('the others completed', async () => (await store.tm.findTasks({ assignee: 'w32', states: ['completed'] })).length === 31);
  });

  it('an idle worker looks before it claims: creates in its queue for another agent cost it no write transaction, creates in another queue not even a look', async () => {
    const store = await fresh();
    const inner = store.tm.store;
    const calls = { claim: 0, claimable: 0 };
    const counting = {
      ...inner,
      claim: (input: Parameters<typeof inner.claim>[0]) => (calls.claim++, inner.claim(input)),
      claimable: (input: Parameters<typeof inner.claimable>[0]) => (calls.claimable++, inner.claimable(input)),
    };
    const tm = createTaskManager({ store: counting });
    const done: number[] = [];
    await start({ ...store, tm }, { agent: 'idle', handler: async (t) => (done.push(t.id), { ok: true }) });
    await new Promise((r) => setTimeout(r, 100));
    calls.claim = 0;
    calls.claimable = 0;
    for (let i = 0; i < 30; i++) await store.tm.createTask({ title: `elsewhere ${i}`, queue: 'other' }, OPERATOR);
    await new Promise((r) => setTimeout(r, 200));
    // Another queue's creates (on this very connection: no poll) do not wake it.
    expect(calls).toEqual({ claim: 0, claimable: 0 });
    for (let i = 0; i < 30; i++) await store.tm.createTask({ title: `not for it ${i}`, queue: 'jobs', forAgent: 'someone-else' }, OPERATOR);
    await new Promise((r) => setTimeout(r, 200));
    // Each commit in its queue made it look (a read); none made it take the write lock for nothing.
    expect(calls.claimable).toBeGreaterThan(0);
    expect(calls.claim).toBe(0);
    const mine = await create(store, 'for the idle worker');
    await until('claimed and done', async () => done.includes(mine.id));
    expect(calls.claim).toBeGreaterThan(0);
  });

  it('close() gives back a task whose handler outlives the grace, and its late result is not written', async () => {
    const store = await fresh();
    const task = await create(store, 'stubborn');
    let started = false;
    let finish!: () => void;
    const { worker } = await start(store, {
      agent: 'w1',
      handler: async () => {
        started = true;
        await new Promise<void>((r) => (finish = r)); // ignores its signal
        return { late: true };
      },
    });
    await until('started', async () => started);
    expect((await store.runs.daemons()).map((d) => d.id)).toEqual([worker.id]);
    await worker.close(50);
    const back = await store.tm.getTask(task.id);
    expect(back).toMatchObject({ state: 'pending', assignee: null });
    expect(await store.runs.daemons()).toEqual([]);
    finish();
    await new Promise((r) => setTimeout(r, 50));
    expect(await store.tm.getTask(task.id)).toMatchObject({ state: 'pending', result: null });
  });

  it('a result that is not JSON or too large fails the task with the reason, and writes no result', async () => {
    const store = await fresh();
    const big = await create(store, 'big', { maxAttempts: 1 });
    const odd = await create(store, 'odd', { maxAttempts: 1 });
    await start(store, {
      agent: 'w1',
      handler: (t) => (t.title === 'big' ? { blob: 'x'.repeat(300 * 1024) } : { n: 10n }),
    });
    const ended = await until('both failed', async () => {
      const both = await Promise.all([store.tm.getTask(big.id), store.tm.getTask(odd.id)]);
      return both.every((t) => t.state === 'failed') ? both : undefined;
    });
    const reasons = ended.map((t) => String(t.events.at(-1)!.data.reason));
    expect(reasons[0]).toMatch(/result was refused: .*at most 262144 bytes/);
    expect(reasons[1]).toMatch(/result is not JSON/);
    expect(ended.map((t) => t.result)).toEqual([null, null]);
  });

  it('refuses bad options with a coded error before registering anything', async () => {
    const store = await fresh();
    const handler = () => null;
    const cases: Array<[Partial<WorkerOptions>, string]> = [
      [{ agent: 'operator' }, 'RESERVED_NAME'],
      [{ agent: 'acceptance' }, 'RESERVED_NAME'],
      [{ queue: '' }, 'VALIDATION_FAILED'],
      [{ queue: 'a b' }, 'VALIDATION_FAILED'],
      [{ concurrency: 0 }, 'VALIDATION_FAILED'],
      [{ concurrency: 1.5 }, 'VALIDATION_FAILED'],
      [{ leaseMs: 10 }, 'VALIDATION_FAILED'],
      [{ finish: 'done' as 'review' }, 'VALIDATION_FAILED'],
      [{ handler: 'nope' as unknown as WorkerOptions['handler'] }, 'VALIDATION_FAILED'],
      [{ store: { tm: store.tm } as unknown as TaskloopStore }, 'VALIDATION_FAILED'],
    ];
    for (const [bad, code] of cases) {
      await expect(createWorker({ store, queue: 'jobs', handler, ...bad })).rejects.toMatchObject({ code });
    }
    expect(await store.runs.daemons()).toEqual([]);
  });
});
