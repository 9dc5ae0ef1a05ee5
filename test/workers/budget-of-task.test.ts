/** The claimer's budget of a new run, read from an unchecked card without a schema parse. */
import { describe, expect, it } from 'vitest';
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
});
