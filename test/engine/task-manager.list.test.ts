/**
 * A listing that leaves cards and results unread (FindTasksQuery.summary), on both stores:
 * the agent's task_list reads through it, so a page of tasks with 256 KiB cards costs what a
 * page of small ones does.
 */
import { describe, expect, it } from 'vitest';
import { freshManager, operator } from '../helpers.js';

describe('findTasks with summary', () => {
  it('returns the same tasks in the same order, each with its card read as {} and its result as null', async () => {
    const tm = freshManager();
    const card = { goal: 'g'.repeat(5_000), allowed_tools: ['echo'] };
    await tm.createTasks([{ title: 'a', card }, { title: 'b', card }, { title: 'c' }], operator);
    const [first] = await tm.findTasks({ states: ['pending'], limit: 1 });
    const c = (await tm.claimTask({ agent: 'w', taskId: first!.id, start: true }))!;
    await tm.transitionTask({ taskId: c.id, to: 'review', actor: { id: 'w', role: 'agent' }, claimToken: c.claimToken, result: { answer: 42 } });

    const whole = await tm.findTasks({});
    const summary = await tm.findTasks({ summary: true });
    expect(whole.map((t) => t.card.goal)).toEqual([card.goal, card.goal, undefined]);
    expect(whole[0]!.result).toEqual({ answer: 42 });
    expect(summary.map((t) => [t.card, t.result])).toEqual([[{}, null], [{}, null], [{}, null]]);
    expect(summary).toEqual(whole.map((t) => ({ ...t, card: {}, result: null })));
    // With the filters a listing uses.
    expect((await tm.findTasks({ states: ['review', 'pending'], visibleTo: { id: 'w', role: 'agent' }, summary: true })).map((t) => [t.title, t.card])).toEqual([['a', {}], ['b', {}], ['c', {}]]);
  });
});
