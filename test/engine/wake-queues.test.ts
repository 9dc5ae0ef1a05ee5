/**
 * Wake-ups by queue, on both stores (wake files on SQLite, NOTIFY channels on PostgreSQL): a
 * claimer that names its queue is woken by a create in that queue made on another connection,
 * not by one in another queue; a watcher of no queue in particular hears both; a task given
 * back to pending wakes the claimers of every queue. The watching store's fallback poll is set
 * to an hour, so only a wake-up can wake it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { RELEASE_LIMIT, wakeBucket } from '../../src/engine/claims.js';
import { freshManager, operator } from '../helpers.js';
import { openTaskStore } from '../stores.js';
import { counter, wokeAfter } from '../wake-helpers.js';

/** Long enough for a wake-up that was coming to have come. */
const SETTLE_MS = 300;

describe('wake-ups by queue', () => {
  it('a claimer of one queue hears creates in its queue, not in another; a watcher of no queue hears both; a task given back to pending wakes every queue', async () => {
    const tm = freshManager();
    const watching = openTaskStore(tm.path, { watchFallbackMs: 3_600_000 });
    onTestFinished(() => watching.close());
    expect(wakeBucket('mail')).not.toBe(wakeBucket('jobs'));
    const jobs = counter();
    const any = counter();
    watching.watch(jobs.hit, 'work', 'jobs');
    watching.watch(any.hit, 'work');
    // Once a create in 'jobs' is heard, the watch is up (PostgreSQL LISTENs asynchronously).
    for (let i = 0; jobs.n === 0 && i < 50; i++) {
      await tm.createTask({ title: `warm-up ${i}`, queue: 'jobs' }, operator);
      await sleep(100);
    }
    expect(jobs.n, 'the watch came up').toBeGreaterThan(0);
    await sleep(SETTLE_MS);

    let j = jobs.n;
    let a = any.n;
    await tm.createTask({ title: 'a letter', queue: 'mail' }, operator);
    expect(await wokeAfter(any, a, 5000), 'a watcher of no queue hears a create in any').toBe(true);
    await sleep(SETTLE_MS);
    expect(jobs.n, "a create in 'mail' does not wake the claimer of 'jobs'").toBe(j);

    j = jobs.n;
    a = any.n;
    const { task } = await tm.createTask({ title: 'a job', queue: 'jobs' }, operator);
    expect(await wokeAfter(jobs, j, 5000), "a create in 'jobs' wakes its claimer").toBe(true);
    expect(await wokeAfter(any, a, 5000)).toBe(true);

    const claim = (await tm.claimTask({ agent: 'a1', queue: 'jobs', taskId: task.id }))!;
    await tm.createTask({ title: 'held', queue: 'mail' }, operator);
    const held = (await tm.claimTask({ agent: 'a1', queue: 'mail' }))!;
    await sleep(SETTLE_MS);
    j = jobs.n;
    // Given back to pending: its event names no queue, so every queue's claimers look.
    await tm.transitionTask({ taskId: held.id, to: 'pending', actor: { id: 'a1', role: 'agent' }, claimToken: held.claimToken });
    expect(await wokeAfter(jobs, j, 5000), "a task of 'mail' given back wakes the claimer of 'jobs' too").toBe(true);
    expect(claim.id).toBe(task.id);
  });

  it('a claim that releases a full RELEASE_LIMIT of tasks fallen due wakes their queue\'s claimers, though it takes none of them, and no other queue\'s; a smaller release wakes no one', async () => {
    const tm = freshManager();
    const watching = openTaskStore(tm.path, { watchFallbackMs: 3_600_000 });
    onTestFinished(() => watching.close());
    expect(wakeBucket('mail')).not.toBe(wakeBucket('jobs'));
    const jobs = counter();
    const mail = counter();
    watching.watch(jobs.hit, 'work', 'jobs');
    watching.watch(mail.hit, 'work', 'mail');
    for (let i = 0; jobs.n === 0 && i < 50; i++) {
      await tm.createTask({ title: `warm-up ${i}`, queue: 'jobs' }, operator);
      await sleep(100);
    }
    expect(jobs.n, 'the watch came up').toBeGreaterThan(0);
    // Carol's three, then RELEASE_LIMIT of bob's, due in 300 ms: a delayed create wakes no one (nothing is claimable yet).
    await tm.createTasks(Array.from({ length: 3 }, (_, i) => ({ title: `for carol ${i}`, queue: 'jobs', forAgent: 'carol', runAfter: Date.now() + 300 })), operator);
    await sleep(SETTLE_MS + 300);
    let j = jobs.n;
    // Alice's claims release carol's three (and take the warm-ups, which are hers to take too): less than a full release.
    while ((await tm.claimTask({ agent: 'alice', queue: 'jobs' })) !== null);
    await sleep(SETTLE_MS);
    expect(jobs.n, 'a release of three wakes no one').toBe(j);
    await tm.createTasks(Array.from({ length: RELEASE_LIMIT }, (_, i) => ({ title: `for bob ${i}`, queue: 'jobs', forAgent: 'bob', runAfter: Date.now() + 300 })), operator);
    await sleep(SETTLE_MS + 300);
    j = jobs.n;
    const m = mail.n;
    expect(await tm.claimTask({ agent: 'alice', queue: 'jobs' })).toBeNull();
    expect(await wokeAfter(jobs, j, 5000), 'the full release woke the claimers of jobs').toBe(true);
    await sleep(SETTLE_MS);
    expect(mail.n, 'a release in jobs does not wake the claimers of mail').toBe(m);
    expect((await tm.claimTask({ agent: 'bob', queue: 'jobs' }))?.title).toMatch(/^for bob/);
  });
});
