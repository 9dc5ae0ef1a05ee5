import { describe, expect, it } from 'vitest';
import type { DecideInput } from '../../src/workers/planner.js';
import { PROMPT_LIMITS, buildPrompt } from '../../src/workers/planners/prompt.js';
import { clip, oneLine } from '../../src/engine/text.js';

const input = (over: Partial<DecideInput> = {}): DecideInput => ({
  goal: 'close T-1',
  steps: [],
  observation: { tool: null, ok: true, data: null },
  allowedTools: [{ name: 'noop', description: 'does nothing', kind: 'read', parameters: { type: 'object' } }],
  rejections: [],
  signal: new AbortController().signal,
  ...over,
});

/** Everything but the fields under test: the prompt of a trivial decision. */
const baseline = buildPrompt(input(), { vision: false }).user.length;

/** A run of whitespace with no line break: the input that made `\s*\n\s*` quadratic. */
const pathological = (n: number) => `a${' \t'.repeat(n / 2)}b`;

describe('the prompt builder bounds untrusted text', () => {
  it('a 1 MB goal is cut to its limit, with an ellipsis and the original length', () => {
    const user = buildPrompt(input({ goal: 'x'.repeat(1_000_000) }), { vision: false }).user;
    expect(user).toContain(`${'x'.repeat(PROMPT_LIMITS.goal)}… (1000000 chars, cut)`);
    expect(user).not.toContain('x'.repeat(PROMPT_LIMITS.goal + 1));
    expect(user.length).toBeLessThan(baseline + PROMPT_LIMITS.goal + 100);
  });

  it('a 60 KB plan goal of pathological whitespace is capped, and so is every plan item, refusal and step field', () => {
    const huge = pathological(60_000);
    const plan = Array.from({ length: 200 }, (_, n) => ({
      id: `item${n}${' '.repeat(1000)}`,
      goal: huge,
      status: 'pending',
      allowed_actions: Array.from({ length: 500 }, () => 'noop'),
      success_evidence: [huge],
    }));
    const rejections = Array.from({ length: 500 }, () => ({ tool: huge, reason: huge }));
    const steps = Array.from({ length: 100 }, (_, n) => ({ seq: n, kind: 'action' as const, status: 'failed', tool: huge, args: { text: huge }, result: null, error: huge }));
    const observation = { tool: 'noop', ok: false, data: { text: huge }, error: huge };
    const user = buildPrompt(input({ goal: huge, plan, rejections, steps, observation }), { vision: false }).user;
    const L = PROMPT_LIMITS;
    const perPlanItem = L.name + L.name + L.planItemGoal + 2 * L.planItemTools + 5 * 40;
    const perRejection = L.name + L.rejectionReason + 2 * 40;
    const perStep = L.name * 2 + L.stepArgs + L.stepText + 3 * 40;
    const bound = baseline + L.goal + L.observation + L.planItems * perPlanItem + L.rejections * perRejection + L.steps * perStep + 1000;
    expect(user.length).toBeLessThan(bound);
    expect(user).toContain('- … and 150 more items');
    expect(user).toContain('(last 20 of 500)');
    expect(user).toContain('(last 30 of 100)');
    expect(user).toContain('(60002 chars, cut)');
  });

  it('builds 200 prompts of pathological whitespace: the work per prompt is bounded by the caps', () => {
    const huge = pathological(60_000);
    const plan = [{ id: 'p', goal: huge, status: 'pending', allowed_actions: [], success_evidence: [] }];
    for (let n = 0; n < 200; n++) expect(buildPrompt(input({ goal: huge, plan }), { vision: false }).user.length).toBeLessThan(baseline + 5000);
  });

  it('a plan item goal, step or refusal with line breaks is put on one line; a goal keeps its lines', () => {
    const user = buildPrompt(input({
      goal: 'first\nsecond',
      plan: [{ id: 'p', goal: 'read \n\r\n  the\u2028status', status: 'pending', allowed_actions: [], success_evidence: [] }],
      rejections: [{ tool: 'noop', reason: 'not\n now' }],
    }), { vision: false }).user;
    expect(user).toContain('## Goal\nfirst\nsecond');
    expect(user).toContain('- p [pending]: read the status (allowed: any allowed tool; evidence: none)');
    expect(user).toContain('- noop: not now');
  });
});

describe('bounded text', () => {
  it('clip keeps short text, cuts long text with its length, and never splits a surrogate pair', () => {
    expect(clip('short', 10)).toBe('short');
    expect(clip('abcdef', 3)).toBe('abc… (6 chars, cut)');
    expect(clip('ab😀cd', 3)).toBe('ab… (6 chars, cut)');
  });

  it('oneLine turns each whitespace run holding a line break into one space and keeps other whitespace', () => {
    expect(oneLine('a \n\t b')).toBe('a b');
    expect(oneLine('a  b\tc')).toBe('a  b\tc');
    expect(oneLine('a\r\nb\u2029c\n')).toBe('a b c ');
    expect(oneLine(pathological(1_000_000))).toHaveLength(1_000_002);
  });
});
