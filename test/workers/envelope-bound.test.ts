/**
 * The envelope repeats at most ENVELOPE_ARGS_BYTES of calls' arguments (session 33's review,
 * F1): a run lists a rejected call for every refused step, up to 10,000, and a refused
 * replan's arguments are a whole card, so the envelope (written twice, read by every reader
 * of the task) grew without bound, and one too big to serialise failed the run's ending.
 */
import { describe, expect, it } from 'vitest';
import { ENVELOPE_ARGS_BYTES, buildEnvelope, emptyTrace } from '../../src/workers/envelope.js';

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
    expect(calls).toHaveLength(2_000);
    const full = Math.floor((ENVELOPE_ARGS_BYTES - JSON.stringify({ key: 'a' }).length) / bytes);
    expect(calls.slice(0, full).every((c) => c.args === big)).toBe(true);
    expect(calls.slice(full).every((c) => JSON.stringify(c.args) === JSON.stringify({ omitted_bytes: bytes }))).toBe(true);
    expect(calls[full]).toEqual({ tool: 'kv_set', args: { omitted_bytes: bytes }, reason: 'out of scope', seq: full + 2 });
    // 2,000 × 10 KB of arguments (20 MB) told in ~0.2 MB.
    expect(JSON.stringify(envelope).length).toBeLessThan(ENVELOPE_ARGS_BYTES + 2_000 * 100);
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
