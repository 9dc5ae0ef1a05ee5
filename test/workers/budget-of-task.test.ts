/** The claimer's budget of a new run, read from an unchecked card without a schema parse. */
import { describe, expect, it } from 'vitest';
import { checkCard } from '../../src/engine/cards.js';
import { budgetOfTask } from '../../src/workers/budget.js';

describe('budgetOfTask', () => {
  it("takes the card's own limits and falls back to the defaults for anything of the wrong type", () => {
    const at = 1_000_000;
    expect(budgetOfTask({ budget: { max_steps: 7, max_failures: 2, max_tokens: 100, deadline: '1m' } }, at)).toMatchObject({ maxSteps: 7, maxFailures: 2, maxTokens: 100, deadlineAt: at + 60_000 });
    // A hostile or broken card: strings, negatives, NaN, an unparsable deadline, no budget at all.
    const defaults = budgetOfTask({}, at);
    expect(defaults).toMatchObject({ maxSteps: 20, maxFailures: 3, deadlineAt: null, maxTokens: null });
    expect(budgetOfTask({ budget: { max_steps: '9', max_failures: -1, max_tokens: Number.NaN, deadline: 'forever' } }, at)).toEqual(defaults);
    expect(budgetOfTask(null, at)).toEqual(defaults);
    expect(budgetOfTask({ budget: [1, 2] }, at)).toEqual(defaults);
  });

  it('a deadline or an approval expiry past 100 years is refused by the card check, and a claim of such a card sets no deadline', () => {
    // Before: now + 100,000,001 days was past Date's range, and every claim of this task (at
    // the head of the queue) threw RangeError: no other task was ever claimed.
    const at = Date.now();
    expect(budgetOfTask({ budget: { deadline: '100000001d' } }, at).deadlineAt).toBeNull();
    expect(budgetOfTask({ budget: { deadline: '36500d' } }, at).deadlineAt).toBe(at + 36_500 * 86_400_000);
    const card = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], acceptance: { checks: [{ id: 'ok', tools_subset: true }] }, script: [{ action: 'done' }] };
    const problems = (c: unknown) => {
      const r = checkCard(c);
      return r.ok ? [] : r.problems;
    };
    expect(problems({ ...card, budget: { max_steps: 5, deadline: '100000001d' } })).toEqual([expect.stringMatching(/^budget\.deadline: .*at most 100 years/)]);
    expect(problems({ ...card, budget: { max_steps: 5 }, approval: { tools: ['noop'], expires_in: '99999999999999999999d' } })).toEqual([expect.stringMatching(/^approval\.expires_in: .*at most 100 years/)]);
  });
});
