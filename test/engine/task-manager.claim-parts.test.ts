/**
 * The claim takes the best task this claimer may take, whichever kind it is: one anyone may
 * claim, one reserved for it, one requiring capabilities it has. On SQLite those are three
 * indexes (migration 10) read one first entry each, so that tasks reserved for another agent
 * or requiring what the claimer lacks are not stepped over on every claim; the order across
 * them is checked here on both stores: by priority, then by age.
 */
import { describe, expect, it } from 'vitest';
import type { ClaimInput } from '../../src/engine/index.js';
import { freshManager, operator } from '../helpers.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

describe('a claim across the kinds of claimable task', () => {
  it('takes them by priority then age, each claimer only what it may take', async () => {
    const tm = freshManager();
    const make = async (title: string, o: { priority?: number; forAgent?: string; requires?: string[]; card?: boolean } = {}) =>
      (await tm.createTask({ title, priority: o.priority, forAgent: o.forAgent, requires: o.requires, card: o.card === true ? CARD : undefined }, operator)).task.id;
    await make('open, 0');
    await make('for alice, 2', { forAgent: 'alice', priority: 2 });
    await make('gpu, 1', { requires: ['gpu'], priority: 1 });
    await make('for bob, 5', { forAgent: 'bob', priority: 5 });
    await make('gpu and tpu, 3', { requires: ['gpu', 'tpu'], priority: 3 });
    await make('for alice with gpu, 4', { forAgent: 'alice', requires: ['gpu'], priority: 4 });
    await make('for alice, 0 (after open, 0)', { forAgent: 'alice' });
    await make('gpu, 0 (after both)', { requires: ['gpu'] });
    await make('open, 0 (last)');

    // Claims in a row, each taking the best that is left for this claimer.
    const takeAll = async (input: ClaimInput): Promise<string[]> => {
      const titles: string[] = [];
      for (let t = await tm.claimTask(input); t !== null; t = await tm.claimTask(input)) titles.push(t.title);
      return titles;
    };
    expect(await takeAll({ agent: 'alice', capabilities: ['gpu'] })).toEqual([
      'for alice with gpu, 4',
      'for alice, 2',
      'gpu, 1',
      'open, 0',
      'for alice, 0 (after open, 0)',
      'gpu, 0 (after both)',
      'open, 0 (last)',
    ]);
    expect(await takeAll({ agent: 'carol', capabilities: ['gpu', 'tpu'] })).toEqual(['gpu and tpu, 3']);
    expect(await takeAll({ agent: 'bob' })).toEqual(['for bob, 5']);
  });

  it('a claimer without capabilities, and a daemon’s pick of tasks with a card, take from every kind they may', async () => {
    const tm = freshManager();
    const make = async (title: string, o: { priority?: number; forAgent?: string; requires?: string[]; card?: boolean } = {}) =>
      (await tm.createTask({ title, priority: o.priority, forAgent: o.forAgent, requires: o.requires, card: o.card === true ? CARD : undefined }, operator)).task.id;
    await make('open card', { card: true });
    await make('open', { priority: 9 });
    await make('for d card, 1', { forAgent: 'd', card: true, priority: 1 });
    await make('for d, 8', { forAgent: 'd', priority: 8 });
    await make('display card, 2', { requires: ['display'], card: true, priority: 2 });
    await make('for e card, 7', { forAgent: 'e', card: true, priority: 7 });
    const titles = async (input: ClaimInput) => {
      const out: string[] = [];
      for (let t = await tm.claimTask(input); t !== null; t = await tm.claimTask(input)) out.push(t.title);
      return out;
    };
    expect(await titles({ agent: 'd', withCard: true, capabilities: ['display'] })).toEqual(['display card, 2', 'for d card, 1', 'open card']);
    expect(await titles({ agent: 'd' })).toEqual(['open', 'for d, 8']);
    expect(await titles({ agent: 'e' })).toEqual(['for e card, 7']);
  });
});
