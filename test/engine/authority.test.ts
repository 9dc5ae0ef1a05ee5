import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type Actor,
  SYSTEM_ACTOR_NAMES,
} from '../../src/engine/index.js';
import { ROOT, agent, codeOf, fakeClock, freshManager, operator } from '../helpers.js';

describe('actors are (id, role)', () => {
  it('no agent may bear the operator’s or a system actor’s name, in any case or width; nothing is written', async () => {
    const tm = freshManager();
    const names = ['operator', 'Operator', 'OPERATOR', 'ｏｐｅｒａｔｏｒ', ...SYSTEM_ACTOR_NAMES, 'Sweeper', 'reviewer'];
    for (const id of names) {
      expect(await codeOf(tm.createTask({ title: 't' }, { id, role: 'agent' })), id).toBe('RESERVED_NAME');
      expect(await codeOf(tm.claimTask({ agent: id })), id).toBe('RESERVED_NAME');
    }
    const { task } = await tm.createTask({ title: 'by the operator' }, operator);
    expect(await codeOf(tm.cancelTask({ taskId: task.id, actor: { id: 'operator', role: 'agent' } }))).toBe('RESERVED_NAME');
    expect(await codeOf(tm.transitionTask({ taskId: task.id, to: 'cancelled', actor: { id: 'sweeper', role: 'reviewer' } }))).toBe('RESERVED_NAME');
    expect((await tm.stats()).lastEventId).toBe(1);
    expect((await tm.getTask(task.id)).state).toBe('pending');
  });

  it('a creator is its id and its role: an agent named like a reviewer who created a task may not cancel it', async () => {
    const tm = freshManager();
    const alice: Actor = { id: 'alice', role: 'reviewer' };
    const { task } = await tm.createTask({ title: 'by reviewer alice' }, alice);
    expect(await codeOf(tm.cancelTask({ taskId: task.id, actor: agent('alice') }))).toBe('FORBIDDEN');
    expect((await tm.getTask(task.id)).state).toBe('pending');
    const mine = await tm.createTask({ title: 'by agent alice' }, agent('alice'));
    await tm.cancelTask({ taskId: mine.task.id, actor: agent('alice') });
    expect((await tm.getTask(mine.task.id)).state).toBe('cancelled');
  });

  it('every event records its actor’s role next to its id, system moves included', async () => {
    const clock = fakeClock();
    const tm = freshManager({ clock });
    const { task } = await tm.createTask({ title: 't', maxAttempts: 1 }, operator);
    await tm.claimTask({ agent: 'worker', leaseMs: 1000 });
    clock.advance(2000);
    await tm.sweep({ graceMs: 0 });
    clock.advance(10);
    await tm.sweep({ graceMs: 0 });
    const events = (await tm.getTask(task.id)).events.map((e) => [e.type, e.actor, e.actorRole]);
    expect(events).toEqual([
      ['task.created', 'operator', 'operator'],
      ['task.claimed', 'worker', 'agent'],
      ['task.stale_reclaimed', 'sweeper', 'system'],
    ]);
  });
});

describe('one authority over state moves', () => {
  it('only the claim and the move writer assign a task’s state: no other adapter file writes tasks.state', () => {
    for (const adapter of ['sqlite', 'postgres']) {
      const dir = join(ROOT, 'src/engine', adapter);
      const writers = readdirSync(dir)
        .filter((f) => f.endsWith('.ts'))
        // state assigned in an UPDATE's SET list, before its WHERE (migrations and releases only read it)
        .filter((f) => /UPDATE\s+tasks\s+SET\s(?:(?!\bWHERE\b)[^;`])*\bstate\s*=/i.test(readFileSync(join(dir, f), 'utf8')));
      expect(writers.sort(), adapter).toEqual(['claim.ts', 'moves.ts']);
      // …and each of them asks the state machine, through the rules both adapters share.
      expect(readFileSync(join(dir, 'claim.ts'), 'utf8')).toMatch(adapter === 'sqlite' ? /checkClaim\(/ : /takeClaim\(/);
      expect(readFileSync(join(dir, 'moves.ts'), 'utf8')).toMatch(/stageMove\(/);
    }
    expect(readFileSync(join(ROOT, 'src/engine/claims.ts'), 'utf8')).toMatch(/checkClaim\(/);
    expect(readFileSync(join(ROOT, 'src/engine/task-rows.ts'), 'utf8')).toMatch(/checkMove\(/);
  });

  it('a system move the state machine has no row for is refused, even from inside the engine', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 't' }, operator);
    // pending -> failed has no mover at all, system included.
    expect(await codeOf(tm.transitionTask({ taskId: task.id, to: 'failed', actor: { id: 'acceptance', role: 'system' } }))).toBe('INVALID_TRANSITION');
    expect((await tm.getTask(task.id)).state).toBe('pending');
  });
});

describe('what a card may do depends on who wrote it', () => {
  const powered = [
    ['launch_allowlist', { goal: 'g', launch_allowlist: [['sh', '-c', 'touch /tmp/pwned']] }],
    ['an acceptance command', { goal: 'g', acceptance: { checks: [{ id: 'x', command: ['sh', '-c', 'touch /tmp/pwned'] }] } }],
  ] as const;
  for (const [what, card] of powered) {
    it(`an agent’s card with ${what} is refused at creation with FORBIDDEN, and nothing is written`, async () => {
      const tm = freshManager();
      expect(await codeOf(tm.createTask({ title: 't', card }, agent('mallory')))).toBe('FORBIDDEN');
      expect(await codeOf(tm.createTasks([{ title: 'ok' }, { title: 't', card }], agent('mallory')))).toBe('FORBIDDEN');
      expect(await codeOf(tm.createTask({ title: 't', card }, { id: 'rita', role: 'reviewer' }))).toBe('FORBIDDEN');
      expect((await tm.stats()).lastEventId).toBe(0);
      // An operator's card may carry it.
      expect((await tm.createTask({ title: 't', card }, operator)).created).toBe(true);
    });
  }

});

describe('idempotency keys are scoped', () => {
  it('one creator’s key never matches another creator’s task; the same creator gets its own task back', async () => {
    const tm = freshManager();
    const a = await tm.createTask({ title: 'a', idempotencyKey: 'k' }, agent('a'));
    const b = await tm.createTask({ title: 'b', idempotencyKey: 'k' }, agent('b'));
    const op = await tm.createTask({ title: 'op', idempotencyKey: 'k' }, operator);
    expect(new Set([a.task.id, b.task.id, op.task.id]).size).toBe(3);
    expect([a.created, b.created, op.created]).toEqual([true, true, true]);
    const again = await tm.createTask({ title: 'a again', idempotencyKey: 'k' }, agent('a'));
    expect(again).toMatchObject({ created: false, task: { id: a.task.id, title: 'a' } });
  });

});

describe('approvals are decided by people who are not the agent', () => {
  it('the rule: an operator, or a reviewer who did not create the task; never an agent', async () => {
    const { mayDecideApproval } = await import('../../src/engine/authority.js');
    const byAgent = { id: 1, creator: 'claude', creatorRole: 'agent' as const, assignee: 'worker' };
    expect(mayDecideApproval(agent('claude'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval(agent('worker'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval(agent('someone-else'), byAgent, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
    expect(mayDecideApproval({ id: 'approval', role: 'system' }, byAgent, 1)).toMatchObject({ ok: false });
    expect(mayDecideApproval(operator, byAgent, 1)).toEqual({ ok: true });
    expect(mayDecideApproval({ id: 'rita', role: 'reviewer' }, byAgent, 1)).toEqual({ ok: true });
    const byRita = { ...byAgent, creator: 'rita', creatorRole: 'reviewer' as const };
    expect(mayDecideApproval({ id: 'rita', role: 'reviewer' }, byRita, 1)).toMatchObject({ ok: false, code: 'FORBIDDEN' });
  });
});
