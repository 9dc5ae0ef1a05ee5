/**
 * Wake files (src/engine/sqlite/wake-files.ts): claimers and runs hear only the commits that
 * concern them, from every process, and another local user cannot turn the file into a way
 * to write ours. The writes come from separate processes (test/fixtures/sqlite-write.mjs);
 * the data_version poll is set to an hour unless a case says otherwise, so only a wake file
 * (or the folder's watch, for `all`) can wake a subscriber.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chownSync, existsSync, linkSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { type SqliteTaskStore, createSqliteRunStore, createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { wakeBucket } from '../../src/engine/claims.js';
import { WAKE_RETRY_MS, wakeFile } from '../../src/engine/sqlite/wake-files.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { ROOT, operator, tempDir } from '../helpers.js';
import { counter, wokeAfter } from '../wake-helpers.js';

const run = promisify(execFile);
const FIXTURE = join(ROOT, 'test/fixtures/sqlite-write.mjs');
/** One write in another process; resolves with what it printed. */
const elsewhere = async (db: string, op: string, args: unknown): Promise<unknown> =>
  JSON.parse((await run(process.execPath, [FIXTURE, db, op, JSON.stringify(args)])).stdout);

const open: SqliteTaskStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});
function store(path: string, watchFallbackMs = 3_600_000): SqliteTaskStore {
  const s = createSqliteStore({ path, watchFallbackMs });
  open.push(s);
  return s;
}

/** A fresh file with one task claimed and started by a1: its store, manager, runs and claim. */
async function startedTask(title: string) {
  const path = join(tempDir(), 'tasks.db');
  const s = store(path);
  const tm = createTaskManager({ store: s });
  const runs = createSqliteRunStore(s);
  await tm.createTask({ title }, operator);
  const claim = (await tm.claimTask({ agent: 'a1', start: true }))!;
  return { path, s, tm, runs, claim };
}

/** The wake file a create in the default queue signals (its bucket's: claims.ts wakeBucket). */
const workFile = (path: string) => wakeFile(path, 'work', wakeBucket('default'));
// After the writing process has exited, its file events have long arrived; this settles them.
const SETTLE_MS = 300;

describe('wake files: who hears which commit', () => {
  it('a claimer (work) wakes on a task created in another process, not on its heartbeats or moves; a follower (all) hears them all', async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    const tm = createTaskManager({ store: s });
    await tm.createTask({ title: 'held' }, operator);
    const held = (await tm.claimTask({ agent: 'a1' }))!;
    const work = counter();
    const all = counter();
    s.watch(work.hit, 'work', 'default');
    s.watch(all.hit);
    await sleep(SETTLE_MS);

    let w = work.n;
    let a = all.n;
    await elsewhere(path, 'heartbeat', { taskId: held.id, claimToken: held.claimToken, agent: 'a1' });
    await elsewhere(path, 'transition', { taskId: held.id, to: 'in_progress', claimToken: held.claimToken, actor: { id: 'a1', role: 'agent' } });
    expect(await wokeAfter(all, a), 'the follower hears a heartbeat and a move').toBe(true);
    await sleep(SETTLE_MS);
    expect(work.n, 'no task became claimable: the claimer sleeps on').toBe(w);

    w = work.n;
    a = all.n;
    const id = await elsewhere(path, 'create', { title: 'new work' });
    expect(await wokeAfter(work, w), 'a created task wakes the claimer').toBe(true);
    expect(await wokeAfter(all, a)).toBe(true);
    expect((await tm.claimTask({ agent: 'a2' }))?.id).toBe(id);
  });

  it('a dependency completed in another process wakes the claimers: its dependent became claimable', async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    const tm = createTaskManager({ store: s });
    const first = (await tm.createTask({ title: 'first' }, operator)).task;
    const then = (await tm.createTask({ title: 'then', dependsOn: [first.id] }, operator)).task;
    const claim = (await tm.claimTask({ agent: 'a1' }))!;
    expect(claim.id).toBe(first.id);
    const actor = { id: 'a1', role: 'agent' as const };
    await tm.transitionTask({ taskId: first.id, to: 'in_progress', claimToken: claim.claimToken, actor });
    await tm.transitionTask({ taskId: first.id, to: 'review', claimToken: claim.claimToken, actor });
    const work = counter();
    s.watch(work.hit, 'work', 'default');
    await sleep(SETTLE_MS);
    const w = work.n;
    expect(await elsewhere(path, 'transition', { taskId: first.id, to: 'completed', actor: operator })).toBe('completed');
    expect(await wokeAfter(work, w)).toBe(true);
    expect((await tm.claimTask({ agent: 'a2' }))?.id).toBe(then.id);
  });

  it('a claimer of one queue wakes on a create in its queue in another process, not in another queue; a claimer of no queue hears both; a task given back to pending wakes every queue', async () => {
    const path = join(tempDir(), 'tasks.db');
    const s = store(path);
    const tm = createTaskManager({ store: s });
    await tm.createTask({ title: 'held', queue: 'other' }, operator);
    const held = (await tm.claimTask({ agent: 'a1', queue: 'other' }))!;
    // Two queues of different buckets (queues sharing one wake each other's claimers).
    expect(wakeBucket('mail')).not.toBe(wakeBucket('jobs'));
    const jobs = counter();
    const any = counter();
    s.watch(jobs.hit, 'work', 'jobs');
    s.watch(any.hit, 'work');
    await sleep(SETTLE_MS);

    let j = jobs.n;
    let a = any.n;
    await elsewhere(path, 'create', { title: 'a letter', queue: 'mail' });
    expect(await wokeAfter(any, a), 'a claimer of no queue in particular hears every commit').toBe(true);
    await sleep(SETTLE_MS);
    expect(jobs.n, "a create in 'mail' does not wake the claimer of 'jobs'").toBe(j);

    j = jobs.n;
    a = any.n;
    const id = await elsewhere(path, 'create', { title: 'a job', queue: 'jobs' });
    expect(await wokeAfter(jobs, j), "a create in 'jobs' wakes its claimer").toBe(true);
    expect(await wokeAfter(any, a)).toBe(true);
    expect((await tm.claimTask({ agent: 'a2', queue: 'jobs' }))?.id).toBe(id);

    // Given back to pending: its event names no queue, so every queue's claimers look.
    j = jobs.n;
    expect(await elsewhere(path, 'transition', { taskId: held.id, to: 'pending', claimToken: held.claimToken, actor: { id: 'a1', role: 'agent' } })).toBe('pending');
    expect(await wokeAfter(jobs, j)).toBe(true);
  });

  it("a queue's name never reaches the file system: its wake file is named by its bucket", async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const s = store(path);
    await createTaskManager({ store: s }).createTask({ title: 'open the file' }, operator);
    const hostile = ['../../escape', '..', 'a:b', 'x'.repeat(64)];
    for (const queue of hostile) s.watch(() => undefined, 'work', queue);
    await sleep(SETTLE_MS);
    const beside = readdirSync(dir).filter((f) => f.startsWith('tasks.db-wake-')).sort();
    expect(beside).toEqual(['tasks.db-wake-work', ...new Set(hostile.map((q) => `tasks.db-wake-work-${wakeBucket(q)}`))].sort());
    for (const f of beside) expect(f).toMatch(/^tasks\.db-wake-work(-[0-9a-f]{2})?$/);
    expect(readdirSync(join(dir, '..')).some((f) => f.includes('escape'))).toBe(false);
  });

  it("a run's control watch wakes on a stop from another process, not on a task created there", async () => {
    const { path, runs, claim } = await startedTask('running');
    const controls = counter();
    runs.watchControls!(controls.hit);
    await sleep(SETTLE_MS);
    const c = controls.n;
    await elsewhere(path, 'create', { title: 'unrelated' });
    await sleep(SETTLE_MS);
    expect(controls.n, 'a create is not a control').toBe(c);
    expect(await elsewhere(path, 'control', { target: [claim.id], state: 'stopped' })).toEqual([claim.id]);
    expect(await wokeAfter(controls, c)).toBe(true);
    expect(await runs.getControl(claim.id)).toBe('stopped');
  });
});

describe('wake files: commits on the watching connection itself', () => {
  it("a cancel on the runs' own connection stops them: the control it writes wakes their watch (data_version ignores own commits)", async () => {
    const { tm, runs, claim } = await startedTask('hosted');
    await runs.openRun({ taskId: claim.id, claimToken: claim.claimToken, agent: 'a1' }, budgetOfTask(null, Date.now()));
    const controls = counter();
    runs.watchControls!(controls.hit);
    const c = controls.n;
    await tm.cancelTask({ taskId: claim.id, actor: operator });
    expect(await wokeAfter(controls, c)).toBe(true);
    expect(await runs.getControl(claim.id)).toBe('stopped');
  });
});

describe('wake files: another local user', () => {
  const victimOf = (dir: string) => {
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'precious\n');
    return victim;
  };

  it('a symlink or a FIFO put where the wake file goes is neither followed nor blocked on; the claimer still wakes, by the poll', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const victim = victimOf(dir);
    symlinkSync(victim, workFile(path));
    execFileSync('mkfifo', [wakeFile(path, 'controls')]);
    const s = store(path, 50);
    const runs = createSqliteRunStore(s);
    const work = counter();
    s.watch(work.hit, 'work', 'default');
    runs.watchControls!(() => undefined);
    await sleep(SETTLE_MS);
    const w = work.n;
    // The writer in another process must not hang on the FIFO nor write through the link.
    const id = await elsewhere(path, 'create', { title: 'through the poll' });
    await elsewhere(path, 'control', { target: [id], state: 'paused' });
    expect(await wokeAfter(work, w)).toBe(true);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(lstatSync(workFile(path)).isSymbolicLink()).toBe(true);
    expect(lstatSync(wakeFile(path, 'controls')).isFIFO()).toBe(true);
  });

  it('a stray file where the wake file goes, once removed, gives way to the wake file: the claimer wakes again without the poll', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    symlinkSync(victimOf(dir), workFile(path));
    const s = store(path);
    const work = counter();
    s.watch(work.hit, 'work', 'default');
    await sleep(SETTLE_MS);
    rmSync(workFile(path));
    // Looked at again within WAKE_RETRY_MS: the watcher makes its own file and watches it.
    const made = Date.now() + 3 * WAKE_RETRY_MS;
    while (!existsSync(workFile(path)) && Date.now() < made) await sleep(20);
    expect(lstatSync(workFile(path)).isFile()).toBe(true);
    await sleep(SETTLE_MS);
    const w = work.n;
    await elsewhere(path, 'create', { title: 'heard through the wake file' });
    expect(await wokeAfter(work, w)).toBe(true);
  });

  it('a hard link to the database put where the wake file goes is never used: the database stays intact', async () => {
    // An agent with a shell as the daemon's user: `ln tasks.db tasks.db-wake-work-<bucket>`. Writing a
    // byte into the "wake file" would have overwritten the database's header.
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const s = store(path, 50);
    const tm = createTaskManager({ store: s });
    await tm.createTask({ title: 'first' }, operator);
    linkSync(path, workFile(path));
    const header = readFileSync(path).subarray(0, 100);
    const work = counter();
    s.watch(work.hit, 'work', 'default');
    const w = work.n;
    await elsewhere(path, 'create', { title: 'second' });
    expect(await wokeAfter(work, w), 'the poll still wakes the claimer').toBe(true);
    expect(readFileSync(path).subarray(0, 100).equals(header)).toBe(true);
    expect((await tm.findTasks()).map((t) => t.title).sort()).toEqual(['first', 'second']);
  });

  it('a wake file that is not ours (or not empty) is neither written nor watched (as root: one owned by nobody)', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const s = store(path, 50);
    const file = workFile(path);
    writeFileSync(file, 'theirs', { mode: 0o666 });
    // Ownership can be handed to another user only by root (CI runs as root); for any other
    // user the file's content alone makes it not a wake file.
    if (process.getuid?.() === 0) chownSync(file, 65534, 65534);
    const before = statSync(file).mtimeMs;
    const work = counter();
    s.watch(work.hit, 'work', 'default');
    const w = work.n;
    await elsewhere(path, 'create', { title: 'new' });
    expect(await wokeAfter(work, w), 'the poll still wakes the claimer').toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('theirs');
    expect(statSync(file).mtimeMs).toBe(before);
    if (process.getuid?.() === 0) {
      // Empty, one name, a regular file: only its owner makes it not ours.
      const controls = wakeFile(path, 'controls');
      writeFileSync(controls, '', { mode: 0o666 });
      chownSync(controls, 65534, 65534);
      const was = statSync(controls).mtimeMs;
      const tm = createTaskManager({ store: s });
      await tm.createTask({ title: 'to pause' }, operator);
      const claim = (await tm.claimTask({ agent: 'a1', start: true }))!;
      expect(await elsewhere(path, 'control', { target: [claim.id], state: 'paused' })).toEqual([claim.id]);
      expect(statSync(controls).mtimeMs).toBe(was);
    }
  });

  it('a writer with no one watching leaves no file beside the database', async () => {
    const dir = tempDir();
    mkdirSync(dir, { recursive: true });
    const path = join(dir, 'tasks.db');
    await elsewhere(path, 'create', { title: 'alone' });
    expect(readdirSync(dir).filter((f) => f.includes('-wake-'))).toEqual([]);
  });
});
