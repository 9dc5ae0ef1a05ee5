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

  it('a claimer takes what its capabilities cover, whatever their order or repeats; one offering more than eight walks, and takes the same', async () => {
    // Tasks of every requirement set over a, b, c, z (z: no claimer has it), not reserved, reserved for alice, reserved for bob.
    const sets = [['a'], ['b'], ['c'], ['z'], ['a', 'b'], ['b', 'a', 'b'], ['a', 'z'], ['a', 'b', 'c'], ['c', 'a'], ['a', 'b', 'c', 'z']];
    const tasks = sets.flatMap((requires, i) => [undefined, 'alice', 'bob'].map((forAgent, j) => ({ title: `${requires.join('+')} for ${forAgent ?? 'anyone'}`, requires, forAgent, priority: (i * 7 + j * 3) % 5 })));
    const claimers: Array<{ agent: string; capabilities: string[] }> = [
      { agent: 'alice', capabilities: ['a'] },
      { agent: 'alice', capabilities: ['b', 'a', 'b'] },
      { agent: 'alice', capabilities: ['c', 'b', 'a'] },
      { agent: 'bob', capabilities: ['x', 'c', 'a', 'b'] },
      { agent: 'alice', capabilities: ['x', 'y', 'c', 'a', 'b'] },
      { agent: 'carol', capabilities: ['v', 'w', 'x', 'y', 'a', 'b'] },
      // MAX_LOOKED_UP (8): 255 sets looked up.
      { agent: 'alice', capabilities: ['t', 'u', 'v', 'w', 'x', 'y', 'c', 'a'] },
      // Past MAX_LOOKED_UP: the walk.
      { agent: 'bob', capabilities: ['s', 't', 'u', 'v', 'w', 'x', 'c', 'a', 'b'] },
    ];
    for (const claimer of claimers) {
      const tm = freshManager();
      const ids: number[] = [];
      for (const t of tasks) ids.push((await tm.createTask(t, operator)).task.id);
      const have = new Set(claimer.capabilities);
      const expected = tasks
        .map((t, i) => ({ ...t, id: ids[i]! }))
        .filter((t) => (t.forAgent === undefined || t.forAgent === claimer.agent) && t.requires.every((c) => have.has(c)))
        .sort((x, y) => y.priority - x.priority || x.id - y.id)
        .map((t) => t.title);
      const taken: string[] = [];
      for (let t = await tm.claimTask(claimer); t !== null; t = await tm.claimTask(claimer)) taken.push(t.title);
      expect(taken, JSON.stringify(claimer)).toEqual(expected);
      expect(expected.length).toBeGreaterThan(1);
    }
  });

  it('a claimer offering five to eight capabilities takes the same behind tasks it cannot take: fewer than a window of them, a window, more', async () => {
    // SQLite reads the first 16 of the tasks requiring capabilities before it looks up a
    // claimer's sets (claim.ts preparePicks); these worlds put 0, 15, 16, 17 and 40 tasks it
    // cannot take in front (at a higher priority), some reserved for another agent.
    const caps = ['f', 'e', 'd', 'c', 'b', 'a'];
    for (const ahead of [0, 15, 16, 17, 40]) {
      const tm = freshManager();
      const made: Array<{ title: string; priority: number; id: number; ok: boolean }> = [];
      const make = async (title: string, priority: number, requires: string[], forAgent: string | undefined, ok: boolean) =>
        made.push({ title, priority, ok, id: (await tm.createTask({ title, priority, requires, forAgent }, operator)).task.id });
      for (let i = 0; i < ahead; i++) await make(`ahead ${i}`, 2, i % 3 === 0 ? ['a'] : ['a', 'z'], i % 3 === 0 ? 'bob' : undefined, false);
      // Not yet due (only an operator delays): in the window's way, never taken.
      for (let i = 0; i < 3; i++) made.push({ title: `later ${i}`, priority: 3, ok: false, id: (await tm.createTask({ title: `later ${i}`, priority: 3, requires: ['a'], runAfter: Date.UTC(2100, 0, 1) }, operator)).task.id });
      await make('a+b', 1, ['b', 'a'], undefined, true);
      await make('f, for alice', 1, ['f'], 'alice', true);
      await make('z', 1, ['z'], undefined, false);
      await make('c+d+e+f', 0, ['c', 'd', 'e', 'f'], undefined, true);
      const expected = made.filter((t) => t.ok).sort((x, y) => y.priority - x.priority || x.id - y.id).map((t) => t.title);
      const claimer = { agent: 'alice', capabilities: caps };
      expect(await tm.store.claimable(claimer), `${ahead} ahead`).toBe(true);
      const taken: string[] = [];
      for (let t = await tm.claimTask(claimer); t !== null; t = await tm.claimTask(claimer)) taken.push(t.title);
      expect(taken, `${ahead} ahead`).toEqual(expected);
      // Only tasks it cannot take are left: the look says so too.
      expect(await tm.store.claimable(claimer), `${ahead} ahead`).toBe(false);
    }
  });
});
