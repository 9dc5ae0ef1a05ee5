/**
 * What an agent lists is what it may read (authority.ts mayRead), whichever way the store
 * reads it. On SQLite an agent's page of a big state is read from the agent's own tasks (the
 * ones it created, migration 9, and the ones it holds or held) instead of walking the whole
 * state: an agent with no completed task asking for the completed ones read 181,000 rows
 * (80 ms, plan audit, session 27). A small state, or an agent with many tasks of its own, is
 * still read through the state. Both ways are checked here against the rule itself.
 */
import { describe, expect, it } from 'vitest';
import { type FindTasksQuery, type Task, mayRead } from '../../src/engine/index.js';
import { agent, freshManager, operator } from '../helpers.js';

describe('an agent’s listing', () => {
  it('is exactly what it may read, for a big state, a small one, every state, keyset pages and limits', async () => {
    const tm = freshManager();
    // A big pending state the agent cannot see: reserved for bob (over the 5,000 that make a state big).
    for (let i = 0; i < 5100; i += 1000) await tm.createTasks(Array.from({ length: Math.min(1000, 5100 - i) }, (_, j) => ({ title: `bob's ${i + j}`, forAgent: 'bob' })), operator);
    await tm.createTasks(Array.from({ length: 30 }, (_, i) => ({ title: `open ${i}` })), operator);
    await tm.createTasks(Array.from({ length: 12 }, (_, i) => ({ title: `alice's ${i}`, forAgent: i % 2 === 0 ? 'bob' : undefined })), agent('alice'));
    await tm.createTasks(Array.from({ length: 8 }, (_, i) => ({ title: `carol's ${i}`, forAgent: 'carol' })), agent('carol'));
    for (let i = 0; i < 6; i += 1) {
      const claimed = (await tm.claimTask({ agent: 'alice', start: i !== 3 }))!;
      if (i < 3) await tm.transitionTask({ taskId: claimed.id, claimToken: claimed.claimToken, to: 'review', actor: agent('alice') });
      if (i === 3) await tm.transitionTask({ taskId: claimed.id, claimToken: claimed.claimToken, to: 'pending', actor: agent('alice') });
    }
    const carols = await tm.findTasks({ creator: 'carol' });
    await tm.cancelTask({ taskId: carols[0]!.id, actor: operator });
    const alices = await tm.findTasks({ creator: 'alice' });
    await tm.cancelTask({ taskId: alices[0]!.id, actor: agent('alice') });

    const all: Task[] = [];
    for (let page = await tm.findTasks({ limit: 1000 }); page.length > 0; page = await tm.findTasks({ limit: 1000, afterId: all.at(-1)!.id })) all.push(...page);
    expect(all).toHaveLength(5100 + 30 + 12 + 8);
    const alice = agent('alice');
    const mid = all[5110]!.id;
    const queries: FindTasksQuery[] = [
      {},
      { states: ['pending'] },
      { states: ['pending'], limit: 7 },
      { states: ['review'] },
      { states: ['cancelled'] },
      { states: ['claimed', 'in_progress', 'review'] },
      { states: ['pending', 'review'], limit: 20 },
      { afterId: mid },
      { states: ['pending'], afterId: mid, limit: 5 },
      { assignee: 'alice' },
      { limit: 3 },
    ];
    for (const q of queries) {
      const expected = all
        .filter((t) => mayRead(alice, t))
        .filter((t) => q.states === undefined || q.states.includes(t.state))
        .filter((t) => q.afterId === undefined || t.id > q.afterId)
        .filter((t) => q.assignee === undefined || t.assignee === q.assignee)
        .map((t) => t.id)
        .slice(0, q.limit ?? 100);
      const got = (await tm.findTasks({ ...q, visibleTo: alice, summary: true })).map((t) => t.id);
      expect(got, JSON.stringify(q)).toEqual(expected);
      expect(expected.length, JSON.stringify(q)).toBeGreaterThan(0);
    }
  }, 60_000);
});
