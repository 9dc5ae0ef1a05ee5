/**
 * Tasks not yet due (an operator's run_after): never handed out early, and once due taken in
 * claim order with everything else, seen by a claimer's look, in their own queue, for whom they
 * are reserved. On SQLite such a task is out of the claimable parts until a claim in its queue
 * releases it (migration 13); the behaviour is the same on both stores.
 */
import { describe, expect, it } from 'vitest';
import { fakeClock, freshManager, operator } from '../helpers.js';
import { execSql, portsOf, querySql } from '../stores.js';
import { RELEASE_LIMIT } from '../../src/engine/claims.js';
import { budgetOfTask } from '../../src/workers/budget.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

describe('a task not yet due', () => {
  it('falls due into claim order: by priority with the tasks already due, in its queue, for its agent', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const at = (s: number) => clock.now() + s * 1000;
    await tm.createTask({ title: 'due now, 0' }, operator);
    await tm.createTask({ title: 'in 10 s, 1', priority: 1, runAfter: at(10) }, operator);
    await tm.createTask({ title: 'in 20 s, 5', priority: 5, runAfter: at(20) }, operator);
    await tm.createTask({ title: 'due now, 0 (later)' }, operator);
    await tm.createTask({ title: 'other queue, in 5 s', priority: 9, queue: 'other', runAfter: at(5) }, operator);
    await tm.createTask({ title: 'for bob, in 5 s', priority: 9, forAgent: 'bob', runAfter: at(5) }, operator);
    const claim = async (agent = 'w', queue?: string) => (await tm.claimTask({ agent, queue }))?.title ?? null;

    expect(await claim()).toBe('due now, 0');
    clock.advance(10_000);
    // Due now: the task of priority 1 comes before the older one of 0.
    expect(await claim()).toBe('in 10 s, 1');
    expect(await claim()).toBe('due now, 0 (later)');
    expect(await claim()).toBeNull();
    // Bob's task is due, but not for w: w's look and claim leave it, bob's take it.
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
    expect(await tm.store.claimable({ agent: 'bob' })).toBe(true);
    expect(await claim('bob')).toBe('for bob, in 5 s');
    clock.advance(10_000);
    expect(await claim()).toBe('in 20 s, 5');
    expect(await claim('w', 'other')).toBe('other queue, in 5 s');
    expect(await claim()).toBeNull();
  });

  it('is seen by a claimer’s look once due, before any claim has taken it', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 'later', runAfter: clock.now() + 60_000 }, operator);
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
    clock.advance(59_999);
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
    expect(await tm.claimTask({ agent: 'w' })).toBeNull();
    clock.advance(1);
    // A worker that looks before it claims (create-worker.ts) would otherwise never claim it.
    expect(await tm.store.claimable({ agent: 'w' })).toBe(true);
    expect((await tm.claimTask({ agent: 'w' }))?.id).toBe(task.id);
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
  });

  it('once due and claimed by id, then given back, is claimed again like any task', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 'later', runAfter: clock.now() + 1000, maxAttempts: 3 }, operator);
    clock.advance(1000);
    const claimed = (await tm.claimTask({ agent: 'w', taskId: task.id }))!;
    await tm.transitionTask({ taskId: task.id, to: 'pending', actor: { id: 'w', role: 'agent' }, claimToken: claimed.claimToken });
    expect(await tm.store.claimable({ agent: 'v' })).toBe(true);
    expect((await tm.claimTask({ agent: 'v' }))?.id).toBe(task.id);
  });

  it('falls due into a daemon’s claim (a pick in its transaction) in claim order, each claimed once', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { runs } = portsOf(tm);
    const claimRun = async () => (await runs.claimRun({ agent: 'daemon-1', withCard: true }, (t, now) => budgetOfTask(t.card, now)))?.task.title ?? null;
    await tm.createTask({ title: 'due, 0', card: CARD }, operator);
    await tm.createTask({ title: 'in 10 s, 5', priority: 5, card: CARD, runAfter: clock.now() + 10_000 }, operator);
    await tm.createTask({ title: 'due, 0 (later)', card: CARD }, operator);
    expect(await claimRun()).toBe('due, 0');
    clock.advance(10_000);
    expect(await claimRun()).toBe('in 10 s, 5');
    expect(await claimRun()).toBe('due, 0 (later)');
    expect(await claimRun()).toBeNull();
  });

  it('written as a build before the change wrote it (not marked delayed, in a part), is still not handed out before its run_after', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    await tm.createTask({ title: 'create first: the schema is there' }, operator);
    await execSql(
      tm,
      `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, run_after, unmet_deps, lease_ms, created_at, updated_at, card)
       VALUES ('old build, in 10 s', 'pending', 5, 'op', 'operator', 3, 'default', $1, 0, 60000, $2, $2, '{}')`,
      [clock.now() + 10_000, clock.now()],
    );
    expect((await tm.claimTask({ agent: 'w' }))?.title).toBe('create first: the schema is there');
    expect(await tm.claimTask({ agent: 'w' })).toBeNull();
    expect(await tm.store.claimable({ agent: 'w' })).toBe(false);
    clock.advance(10_000);
    expect((await tm.claimTask({ agent: 'w' }))?.title).toBe('old build, in 10 s');
  });

  it('behind more fallen due than one release holds that it may not take, a claim still takes its own (plain and daemon claims)', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { runs } = portsOf(tm);
    const at = clock.now() + 1000;
    // 1,200 reserved for an agent that is not running, due first; then one for anyone, and a daemon's.
    for (let i = 0; i < 1200; i += 600) {
      await tm.createTasks(Array.from({ length: 600 }, (_, j) => ({ title: `for ghost ${i + j}`, forAgent: 'ghost', card: CARD, runAfter: at })), operator);
    }
    await tm.createTask({ title: 'mine', priority: 9, runAfter: at + 1 }, operator);
    await tm.createTask({ title: 'the daemon’s', card: CARD, runAfter: at + 2 }, operator);
    await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `for ghost, no card ${i}`, forAgent: 'ghost', runAfter: at + 3 })), operator);
    await tm.createTask({ title: 'the daemon’s, behind more', card: CARD, runAfter: at + 4 }, operator);
    clock.advance(2000);
    expect(await tm.store.claimable({ agent: 'w' })).toBe(true);
    expect((await tm.claimTask({ agent: 'w' }))?.title).toBe('mine');
    const claimRun = async () => (await runs.claimRun({ agent: 'daemon-1', withCard: true }, (t, now) => budgetOfTask(t.card, now)))?.task.title ?? null;
    expect(await claimRun()).toBe('the daemon’s');
    expect(await claimRun()).toBe('the daemon’s, behind more');
    expect(await claimRun()).toBeNull();
  });

  it('a claim behind many due tasks it may take releases one RELEASE_LIMIT, takes the best of them, and stops there', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    for (let i = 0; i < 1200; i += 600) {
      await tm.createTasks(Array.from({ length: 600 }, (_, j) => ({ title: `at nine ${i + j}`, priority: (i + j) % 5 === 0 ? 1 : 0, runAfter: clock.now() + 1000 })), operator);
    }
    clock.advance(1000);
    expect((await tm.claimTask({ agent: 'w' }))?.title).toBe('at nine 0');
    // One release, not RELEASE_ROUNDS of them: the first held a task it may take.
    const [released] = await querySql<{ n: number }>(tm, 'SELECT count(*) AS n FROM tasks WHERE NOT delayed');
    expect(Number(released!.n)).toBe(RELEASE_LIMIT);
  });
});
