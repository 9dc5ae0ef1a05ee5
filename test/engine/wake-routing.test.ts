/**
 * Wake-ups by queue on SQLite (claims.ts workWakeOf, watch.ts): every commit that may make a
 * task claimable for a claimer wakes it, though creates in other queues do not; and the
 * watcher's folder watch (every commit anywhere) ends once nobody follows the log. Writes come
 * from separate processes (test/fixtures/sqlite-write.mjs, which imports dist/); the
 * data_version poll is set to an hour, so only a wake file can wake a claimer. (Found by the
 * hostile review of session 14; the folder-watch case failed on its first version.)
 */
import { execFile } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { type SqliteTaskStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { MAX_QUEUE_WAKES, wakeBucket } from '../../src/engine/claims.js';
import { ROOT, operator, tempDir } from '../helpers.js';
import { counter, inotifyInodes, wokeAfter } from '../wake-helpers.js';

const run = promisify(execFile);
const FIXTURE = join(ROOT, 'test/fixtures/sqlite-write.mjs');
const elsewhere = async (db: string, op: string, args: unknown): Promise<unknown> =>
  JSON.parse((await run(process.execPath, [FIXTURE, db, op, JSON.stringify(args)])).stdout);

const SETTLE_MS = 300;
const open: SqliteTaskStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
function store(path: string): SqliteTaskStore {
  const s = createSqliteStore({ path, watchFallbackMs: 3_600_000 });
  open.push(s);
  return s;
}
/** `n` queues whose buckets differ from each other's and from `avoid`'s. */
function queuesOfOtherBuckets(n: number, avoid: string[]): string[] {
  const taken = new Set(avoid.map(wakeBucket));
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    if (taken.has(wakeBucket(`q${i}`))) continue;
    taken.add(wakeBucket(`q${i}`));
    out.push(`q${i}`);
  }
  return out;
}

describe('wake-ups by queue: every commit that may make a task claimable wakes its claimer', () => {
  it('a task created with its only dependency already completed wakes the claimer of its queue', async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    const tm = createTaskManager({ store: s });
    const dep = (await tm.createTask({ title: 'dep', queue: 'jobs' }, operator)).task;
    const c = (await tm.claimTask({ agent: 'a1', queue: 'jobs', start: true }))!;
    await tm.transitionTask({ taskId: dep.id, to: 'review', claimToken: c.claimToken, actor: { id: 'a1', role: 'agent' } });
    await tm.transitionTask({ taskId: dep.id, to: 'completed', actor: operator });
    const jobs = counter();
    s.watch(jobs.hit, 'work', 'jobs');
    await sleep(SETTLE_MS);
    const mark = jobs.n;
    const id = await elsewhere(path, 'create', { title: 'after dep', queue: 'jobs', dependsOn: [dep.id] });
    expect(await wokeAfter(jobs, mark)).toBe(true);
    expect((await tm.claimTask({ agent: 'a2', queue: 'jobs' }))?.id).toBe(id);
  });

  it(`a batch across up to ${MAX_QUEUE_WAKES} queues wakes only theirs; one across more wakes every queue's claimer`, async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    await createTaskManager({ store: s }).createTask({ title: 'open' }, operator);
    const jobs = counter();
    s.watch(jobs.hit, 'work', 'jobs');
    await sleep(SETTLE_MS);
    const batch = (queues: string[]) => elsewhere(path, 'batch', { inputs: queues.map((queue, i) => ({ title: `${queue} ${i}`, queue })) });

    const eight = queuesOfOtherBuckets(MAX_QUEUE_WAKES, ['jobs']);
    let mark = jobs.n;
    await batch(eight);
    await sleep(SETTLE_MS);
    expect(jobs.n, 'none of them in the bucket of jobs').toBe(mark);

    mark = jobs.n;
    await batch([...eight.slice(1), 'jobs']);
    expect(await wokeAfter(jobs, mark), 'jobs among them').toBe(true);

    await sleep(SETTLE_MS);
    mark = jobs.n;
    await batch(queuesOfOtherBuckets(MAX_QUEUE_WAKES + 1, ['jobs']));
    expect(await wokeAfter(jobs, mark), 'too many queues to name: every claimer').toBe(true);
  });

  it('the stale sweep requeues a task of one queue: the claimers of every queue wake', async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    const tm = createTaskManager({ store: s });
    const t = (await tm.createTask({ title: 'will expire', queue: 'mail' }, operator)).task;
    await tm.claimTask({ agent: 'a1', queue: 'mail', leaseMs: 100, start: true });
    const jobs = counter();
    s.watch(jobs.hit, 'work', 'jobs');
    await sleep(SETTLE_MS);
    const mark = jobs.n;
    expect(((await elsewhere(path, 'sweep', { graceMs: 0 })) as { requeued: number[] }).requeued).toEqual([t.id]);
    expect(await wokeAfter(jobs, mark)).toBe(true);
  });
});

describe('the folder watch (every commit anywhere) lasts only while the log is followed', () => {
  it('it ends a moment after the last follower leaves, even when a claimer subscribes in that moment', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const s = store(path);
    await createTaskManager({ store: s }).createTask({ title: 'open' }, operator);
    const folder = statSync(dir).ino;
    const folderWatches = () => inotifyInodes().filter((i) => i === folder).length;

    // A follower alone leaves (everything lingers), and a claimer comes within the moment.
    const offAll = s.watch(() => undefined);
    expect(folderWatches()).toBe(1);
    offAll();
    await sleep(100);
    const offWork = s.watch(() => undefined, 'work', 'jobs');
    await sleep(2500);
    expect(folderWatches(), 'the claimer does not keep the folder watched').toBe(0);

    // A follower comes and goes while the claimer stays.
    const offAgain = s.watch(() => undefined);
    expect(folderWatches()).toBe(1);
    offAgain();
    await sleep(1500);
    expect(folderWatches()).toBe(0);
    offWork();
  });
});
