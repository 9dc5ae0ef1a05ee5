import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { onTestFinished, describe, expect, it } from 'vitest';
import { OPERATOR, type TaskloopStore, createWorker, openStore } from '../../src/index.js';
import { ROOT, tempDir } from '../helpers.js';

const run = promisify(execFile);

/**
 * A store whose claim transactions are counted (every one the store runs, found or not), and
 * its looks (`claimable`, the read an idle worker makes before it claims): `attempts` is both.
 */
async function counted(): Promise<{ store: TaskloopStore; claims: () => number; attempts: () => number }> {
  const store = await openStore({ path: join(tempDir(), 'tasks.db') });
  onTestFinished(() => store.close());
  const inner = store.tm.store;
  const claim = inner.claim.bind(inner);
  const claimable = inner.claimable.bind(inner);
  let n = 0;
  let looks = 0;
  inner.claim = (input) => {
    n++;
    return claim(input);
  };
  inner.claimable = (input) => {
    looks++;
    return claimable(input);
  };
  return { store, claims: () => n, attempts: () => n + looks };
}

async function until<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Resolves once the store's change watch has reported a commit made after this call (the worker's listener ran first). */
function nextChange(store: TaskloopStore): Promise<void> {
  return new Promise((resolve) => {
    const off = store.tm.store.watch(() => {
      off();
      // One macrotask more: whatever the worker's listener started has begun its claim.
      setImmediate(resolve);
    });
  });
}

const elsewhere = (store: TaskloopStore, title: string) => store.tm.createTask({ title, queue: 'elsewhere' }, OPERATOR);

describe('createWorker claims', () => {
  it('eight idle slots make about one claim attempt per create in their queue (for another agent), not eight, and each a look, not a write', async () => {
    const { store, claims, attempts } = await counted();
    const worker = await createWorker({ store, queue: 'jobs', agent: 'w1', concurrency: 8, idleMs: 60_000, handler: () => ({ ok: true }) });
    onTestFinished(() => worker.close(100));
    await until('the first empty attempt', () => attempts() >= 1);
    const before = attempts();
    const writesBefore = claims();
    const commits = 10;
    for (let i = 0; i < commits; i++) {
      const seen = attempts();
      const change = nextChange(store);
      await store.tm.createTask({ title: `for another agent ${i}`, queue: 'jobs', forAgent: 'w2' }, OPERATOR);
      await change;
      // Every commit is answered by an attempt (a task could have come with it) ...
      await until(`an attempt after commit ${i}`, () => attempts() > seen);
    }
    // ... each of them a look: no write transaction found nothing.
    expect(claims()).toBe(writesBefore);
    // ... and one task of its queue is still picked up and completed (which also lets any
    // claim the commits above set off run before the count is read).
    const job = (await store.tm.createTask({ title: 'the job', queue: 'jobs' }, OPERATOR)).task;
    await until('the job completed', async () => (await store.tm.getTask(job.id)).state === 'completed');
    const made = attempts() - before;
    // One attempt per commit, one again when a commit lands during one, the job's own
    // look and claim and the attempts its moves set off; one claimer per slot would make >= 80.
    expect(made).toBeGreaterThanOrEqual(commits);
    expect(made).toBeLessThanOrEqual(2 * commits + 6);
  });

  it('creates in another queue by another process wake an idle worker only by the store’s poll: a few looks, not one per create', async () => {
    const { store, attempts } = await counted();
    const worker = await createWorker({ store, queue: 'jobs', agent: 'w1', concurrency: 4, idleMs: 60_000, handler: () => ({ ok: true }) });
    onTestFinished(() => worker.close(100));
    await until('the first empty attempt', () => attempts() >= 1);
    const before = attempts();
    const started = Date.now();
    const creates = 300;
    await run(process.execPath, [join(ROOT, 'test/fixtures/sqlite-write.mjs'), store.path, 'create-many', JSON.stringify({ n: creates, input: { title: 'mail', queue: 'elsewhere' } })]);
    await new Promise((r) => setTimeout(r, 200));
    const polls = Math.ceil((Date.now() - started) / 50) + 1;
    const made = attempts() - before;
    // The data_version poll (every 50 ms) wakes every claimer once per interval with commits in it.
    expect(made).toBeLessThanOrEqual(polls);
    expect(made).toBeLessThan(creates / 4);
    const job = (await store.tm.createTask({ title: 'the job', queue: 'jobs' }, OPERATOR)).task;
    await until('the job completed', async () => (await store.tm.getTask(job.id)).state === 'completed');
  });

  it('a storm of commits by another agent (tasks on another queue) costs the idle worker a few claim attempts, not one per slot per commit', async () => {
    const { store, attempts } = await counted();
    const worker = await createWorker({ store, queue: 'jobs', agent: 'w1', concurrency: 16, idleMs: 60_000, handler: () => ({ ok: true }) });
    onTestFinished(() => worker.close(100));
    await until('the first empty attempt', () => attempts() >= 1);
    const before = attempts();
    const storm = 200;
    await Promise.all(Array.from({ length: storm }, (_, i) => elsewhere(store, `spam ${i}`)));
    const job = (await store.tm.createTask({ title: 'the job', queue: 'jobs' }, OPERATOR)).task;
    await until('the job completed', async () => (await store.tm.getTask(job.id)).state === 'completed');
    // The storm is answered by an attempt or two (commits that land while one runs are
    // answered by one after it), the job by its own look and claim and those its moves set
    // off; one claimer per slot would make at least 16.
    const made = attempts() - before;
    expect(made).toBeGreaterThanOrEqual(2);
    expect(made).toBeLessThanOrEqual(10);
  });

  it('at capacity it makes no claim at all, however many commits land, and claims again when a handler ends', async () => {
    const { store, claims } = await counted();
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push((await store.tm.createTask({ title: `job ${i}`, queue: 'jobs' }, OPERATOR)).task.id);
    const release = new Map<number, () => void>();
    let releaseAll = false;
    const worker = await createWorker({
      store,
      queue: 'jobs',
      agent: 'w1',
      concurrency: 2,
      idleMs: 60_000,
      handler: (task) => (releaseAll ? { id: task.id } : new Promise((resolve) => release.set(task.id, () => resolve({ id: task.id })))),
    });
    onTestFinished(() => worker.close(100));
    await until('two handlers running', () => worker.active === 2);
    // The first two claims found a task each; the claimer then waits for a slot.
    expect(claims()).toBe(2);
    for (let i = 0; i < 5; i++) {
      const change = nextChange(store);
      await store.tm.createTask({ title: `for another agent ${i}`, queue: 'jobs', forAgent: 'w2' }, OPERATOR);
      await change;
    }
    expect(claims()).toBe(2);
    const states = await Promise.all(ids.map(async (id) => (await store.tm.getTask(id)).state));
    expect(states.filter((s) => s === 'pending')).toHaveLength(2);

    // A handler ends: its slot is free, and the claimer takes the next task at once.
    const first = [...release.keys()][0]!;
    release.get(first)!();
    await until('a third handler running', () => release.size === 3);
    expect(worker.active).toBe(2);
    expect((await store.tm.getTask(first)).state).toBe('completed');
    releaseAll = true;
    for (const r of release.values()) r();
    await until('all completed', async () => (await Promise.all(ids.map((id) => store.tm.getTask(id)))).every((t) => t.state === 'completed'));
  });

  it('a handler that runs for several leases keeps its claim: the holder renews the lease of its slot every beat', async () => {
    const { store } = await counted();
    const task = (await store.tm.createTask({ title: 'long', queue: 'jobs' }, OPERATOR)).task;
    const leaseMs = 150;
    const expiries = new Set<number>();
    const worker = await createWorker({
      store,
      queue: 'jobs',
      agent: 'w1',
      leaseMs,
      sweepMs: 0,
      handler: async (t, ctx) => {
        const until4 = Date.now() + 4 * leaseMs;
        await until('four leases', async () => {
          // A sweep with no grace would take the task at once if its lease had run out.
          await store.tm.sweep({ graceMs: 0 });
          const now = await store.tm.getTask(t.id);
          if (now.leaseExpiresAt !== null) expiries.add(now.leaseExpiresAt);
          return ctx.signal.aborted || Date.now() > until4;
        });
        return { aborted: ctx.signal.aborted };
      },
    });
    onTestFinished(() => worker.close(100));
    const done = await until('completed', async () => {
      const now = await store.tm.getTask(task.id);
      return now.state === 'completed' ? now : undefined;
    });
    expect(done).toMatchObject({ attempts: 1, result: { aborted: false } });
    expect(done.events.some((e) => e.type === 'task.stale_reclaimed')).toBe(false);
    // Renewed by the beat (a third of the lease), not just the first lease.
    expect(expiries.size).toBeGreaterThanOrEqual(3);
  });

  it('refuses capabilities that are not a list of names before registering anything', async () => {
    const { store } = await counted();
    for (const capabilities of [['gpu', 'has space'], 'gpu', Array.from({ length: 33 }, (_, i) => `c${i}`)]) {
      await expect(createWorker({ store, queue: 'jobs', handler: () => null, capabilities: capabilities as string[] })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    }
    expect(await store.runs.daemons()).toEqual([]);
  });
});
