/**
 * What a planner writes reaches the step it makes: a tool's name as the planner gave it, and
 * an error quoting its arguments. A NUL there made every write of the step fail on
 * PostgreSQL (it stores no NUL), so the run failed on every attempt; a line break or an
 * escape sequence reached the operator's terminal in `task show`. The loop writes that text
 * escaped, on both stores, and the run goes on.
 */
import { describe, expect, it } from 'vitest';
import type { Decision, Planner } from '../../src/workers/planner.js';
import { card, harness, runCard } from './harness.js';

/** A planner that answers with `decisions` in turn, as a model could (no card script to check them). */
function answering(decisions: Decision[]): Planner {
  let i = 0;
  return { name: 'hostile', decide: async () => ({ decision: decisions[i++] ?? { action: 'done', reason: 'all done' } }) };
}

describe('hostile text in the steps a planner makes', () => {
  it('a NUL, a line break and an escape sequence in a tool name or in arguments are written escaped, and the run completes', async () => {
    const h = harness();
    const { result, claim } = await runCard(
      h,
      card({ allowed_tools: ['task_cancel', 'noop'] }),
      {
        planner: () =>
          answering([
            { action: 'tool', tool: 'task_cancel', args: { task_id: 1, 'te\u0000xt': 'x' }, reason: 'r' }, // refused by the gate on the tool's strict schema, which quotes the key
            { action: 'tool', tool: 'no\u0000op\n\u001b[2J', args: {}, reason: 'r' }, // not on the allowlist
            { action: 'tool', tool: 'noop', args: {}, reason: 'r' },
          ]),
      },
    );
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    const { steps } = await h.runs.getRun(result.runId);
    const actions = steps.filter((s) => s.kind === 'action');
    expect(actions.map((s) => s.status)).toEqual(['rejected', 'rejected', 'ok']);
    expect(actions[0]!.error).toContain('te\\u0000xt');
    expect(actions[1]!.tool).toBe('no\\u0000op\\n\\u001b[2J');
    for (const s of steps) expect(`${s.tool ?? ''} ${s.error ?? ''}`).not.toMatch(/[\u0000-\u001f]/);
    expect((await h.tm.getTask(claim.id)).state).toBe('completed');
  });

  it("a planner's fractional, huge or negative token counts are kept as whole counts, and the run completes on both stores", async () => {
    const h = harness();
    const counts = [0.5, 1e20, -7, Number.NaN];
    let i = 0;
    const planner: Planner = {
      name: 'odd-usage',
      decide: async () => ({
        decision: i < counts.length ? { action: 'tool', tool: 'noop', args: { n: i }, reason: 'r' } : { action: 'done', reason: 'done' },
        usage: { promptTokens: counts[i++] ?? 1, completionTokens: 0, cost: i === 2 ? Number.POSITIVE_INFINITY : 0.25 },
      }),
    };
    const { result } = await runCard(h, card({ allowed_tools: ['noop'], loop: { repeat_limit: 10, idle_rounds: 100 } }), { planner: () => planner });
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    const { steps, usage } = await h.runs.getRun(result.runId);
    const decided = steps.filter((s) => s.kind === 'decide').map((s) => s.tokens);
    expect(decided).toEqual([1, Number.MAX_SAFE_INTEGER, 0, 0, 1]);
    expect(usage.tokens).toBe(Number.MAX_SAFE_INTEGER);
    expect(Number.isFinite(usage.cost)).toBe(true);
  });
});
