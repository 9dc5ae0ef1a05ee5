/**
 * The envelope repeats at most ENVELOPE_ARGS_BYTES of calls' arguments (session 33's review,
 * F1): a run lists a rejected call for every refused step, up to 10,000, and a refused
 * replan's arguments are a whole card, so the envelope (written twice, read by every reader
 * of the task) grew without bound, and one too big to serialise failed the run's ending.
 */
import { describe, expect, it } from 'vitest';
import { checkCard } from '../../src/engine/index.js';
import { PLAN_ITEMS } from '../../src/engine/cards.js';
import { ENVELOPE_ARGS_BYTES, ENVELOPE_REASON_CHARS, ENVELOPE_REJECTED, buildEnvelope, emptyTrace } from '../../src/workers/envelope.js';
import { card, harness, runCard } from './harness.js';

describe('the envelope bounds the arguments it repeats', () => {
  it('side effects first, then rejected calls, in full up to ENVELOPE_ARGS_BYTES; past it each says how many bytes its step keeps', () => {
    const trace = emptyTrace();
    const big = { text: 'x'.repeat(10_000) };
    const bytes = JSON.stringify(big).length;
    trace.sideEffects.push({ tool: 'kv_set', args: { key: 'a' }, seq: 1, status: 'unknown' });
    for (let i = 0; i < 2_000; i++) trace.rejectedCalls.push({ tool: 'kv_set', args: big, reason: 'out of scope', seq: i + 2 });
    const envelope = buildEnvelope({ runId: 1, taskId: 1, phase: 'failed', stopReason: 'max_failures', trace, stepCount: 2_001, checkpointVersion: 2_001 });
    expect(envelope.side_effects).toEqual([{ tool: 'kv_set', args: { key: 'a' }, seq: 1, status: 'unknown' }]);
    const calls = envelope.trace.rejected_calls;
    expect(calls).toHaveLength(ENVELOPE_REJECTED);
    expect(envelope.trace.rejected_omitted).toBe(2_000 - ENVELOPE_REJECTED);
    const full = Math.floor((ENVELOPE_ARGS_BYTES - JSON.stringify({ key: 'a' }).length) / bytes);
    expect(calls.slice(0, full).every((c) => c.args === big)).toBe(true);
    expect(calls.slice(full).every((c) => JSON.stringify(c.args) === JSON.stringify({ omitted_bytes: bytes }))).toBe(true);
    expect(calls[full]).toEqual({ tool: 'kv_set', args: { omitted_bytes: bytes }, reason: 'out of scope', seq: full + 2 });
    // 2,000 × 10 KB of arguments (20 MB) told in ~0.1 MB.
    expect(JSON.stringify(envelope).length).toBeLessThan(ENVELOPE_ARGS_BYTES + ENVELOPE_REJECTED * 100);
    // The trace itself is left as it is (the loop goes on with it).
    expect(trace.rejectedCalls[1_999]!.args).toBe(big);
  });

  it('arguments that cannot be written as JSON are omitted, whatever the budget left', () => {
    const trace = emptyTrace();
    trace.rejectedCalls.push({ tool: 't', args: { n: 1n }, reason: 'r', seq: 1 });
    const envelope = buildEnvelope({ runId: 1, taskId: 1, phase: 'failed', stopReason: 'x', trace, stepCount: 1, checkpointVersion: 1 });
    expect(envelope.trace.rejected_calls).toEqual([{ tool: 't', args: { omitted_bytes: null }, reason: 'r', seq: 1 }]);
  });
});

describe('refused calls in the envelope (session 33, second review)', () => {
  it(`a run refused 150 times quoting control characters lists ${ENVELOPE_REJECTED} refusals with reasons of at most ${ENVELOPE_REASON_CHARS} characters, and counts the rest; each step's error is cut after escaping`, async () => {
    const h = harness();
    // A plan item whose id is 1,000 control characters: each refusal of a call outside it quotes the id.
    const id = '\u0001'.repeat(1000);
    const { result } = await runCard(h, card({
      allowed_tools: ['noop', 'echo'],
      budget: { max_steps: 500 },
      loop: { repeat_limit: 100, idle_rounds: 1000 },
      plan: [{ id, goal: 'g', allowed_actions: ['echo'] }],
      script: [...Array.from({ length: 150 }, () => ({ action: 'tool', tool: 'noop' })), { action: 'done' }],
    }));
    const trace = result.envelope!.trace;
    expect(trace.rejected_calls).toHaveLength(ENVELOPE_REJECTED);
    expect(trace.rejected_omitted).toBe(150 - ENVELOPE_REJECTED);
    for (const r of trace.rejected_calls) expect(r.reason.length).toBeLessThanOrEqual(ENVELOPE_REASON_CHARS + 30);
    // The step rows: each error escaped (\u0001 is six characters) and cut to 1,000 after that (about 5,800 before).
    const { steps } = await h.runs.getRun(result.runId);
    const errors = steps.map((s) => s.error).filter((e): e is string => typeof e === 'string' && e.includes('\\u0001'));
    expect(errors).toHaveLength(150);
    for (const e of errors) expect(e.length).toBeLessThanOrEqual(1030);
    expect(JSON.stringify(result.envelope).length).toBeLessThan(150_000);
  });

  it(`a card's plan has at most ${PLAN_ITEMS} items`, () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `i${i}`, goal: 'g' }));
    expect(checkCard(card({ plan: items(PLAN_ITEMS) })).ok).toBe(true);
    const over = checkCard(card({ plan: items(PLAN_ITEMS + 1) }));
    expect(over.ok ? [] : over.problems).toEqual([`plan: at most ${PLAN_ITEMS} items`]);
  });
});
