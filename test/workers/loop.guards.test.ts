import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { POLICY, card, harness, runCard } from './harness.js';
import { createScriptedPlanner } from '../../src/workers/planners/scripted.js';
import { PlannerError } from '../../src/workers/planner.js';

describe('the task loop guard rails', () => {
  it('a card-declared max_steps of 1 ends the run after one step: budget_exhausted / max_steps', async () => {
    const h = harness();
    const { result, events, claim } = await runCard(h, card({ budget: { max_steps: 1 }, script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'noop' }] }));
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'max_steps' });
    expect(events.filter((e) => e.type === 'step_finished' && e.step.kind === 'action')).toHaveLength(1);
    expect((await h.tm.getTask(claim.id)).state).toBe('failed');
  });

  it("a read still running at the run's deadline is cut off there (budget_exhausted / deadline), not left to its own timeout; so is an observation", async () => {
    const h = harness();
    const { result, events } = await runCard(h, card({ allowed_tools: ['wait'], budget: { max_steps: 5, deadline: '1s' }, script: [{ action: 'tool', tool: 'wait', args: { ms: 60_000 } }, { action: 'done' }] }));
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    const action = events.flatMap((e) => (e.type === 'step_finished' && e.step.kind === 'action' ? [e.step] : []));
    expect(action).toHaveLength(1);
    expect(action[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/^wait: cut off at the run's deadline after \d+ ms$/) });
    expect(action[0]!.durationMs).toBeLessThan(60_000);
    // Not the tool's fault: its breaker heard nothing, and it is no failure of the run's.
    expect(await h.runs.breakers()).toEqual([]);
    expect(result.envelope!.progress).toMatchObject({ consecutive_failures: 0 });

    const observed = await runCard(h, card({ allowed_tools: ['noop', 'wait'], observe: { tool: 'wait', args: { ms: 60_000 } }, budget: { max_steps: 5, deadline: '1s' }, script: [{ action: 'done' }] }));
    expect(observed.result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    const seen = observed.events.flatMap((e) => (e.type === 'step_finished' && e.step.kind === 'observe' ? [e.step] : []));
    expect(seen).toMatchObject([{ status: 'failed', error: expect.stringMatching(/cut off at the run's deadline/) }]);
  });

  it("a read cut at its deadline ends the run there, even when the cut's timer fires before the run's clock reads the deadline", async () => {
    const h = harness();
    // A clock that runs 20% slow: when the cut fires, the run's clock has not reached the deadline yet.
    const t0 = Date.now();
    const slow = () => t0 + Math.floor((Date.now() - t0) * 0.8);
    const { result, events } = await runCard(h, card({ allowed_tools: ['wait'], budget: { max_steps: 5, deadline: '1s' }, script: [{ action: 'tool', tool: 'wait', args: { ms: 60_000 } }, { action: 'done' }] }), { now: slow });
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    expect(events.filter((e) => e.type === 'step_finished' && e.step.kind === 'decide')).toHaveLength(1);
  });

  it("the card's final_state reads may run past the deadline, by as long again as the run had (at most 30 s) all together, and no longer", async () => {
    const h = harness();
    const across = await runCard(h, card({
      allowed_tools: ['wait'],
      budget: { max_steps: 5, deadline: '1500ms' },
      script: [{ action: 'tool', tool: 'wait', args: { ms: 800 } }, { action: 'done' }],
      final_state: { w: { tool: 'wait', args: { ms: 1500 } } },
      acceptance: { checks: [{ id: 'waited', path: 'w.waited_ms', exists: true }] },
    }));
    expect(across.result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });

    // Three reads of a minute each after a 300 ms deadline: cut off together 300 ms past it.
    const long = Object.fromEntries([1, 2, 3].map((n) => [`w${n}`, { tool: 'wait', args: { ms: 60_000 + n } }]));
    const cut = await runCard(h, card({
      allowed_tools: ['wait'],
      budget: { max_steps: 5, deadline: '300ms' },
      script: [{ action: 'done' }],
      final_state: long,
      acceptance: { checks: [1, 2, 3].map((n) => ({ id: `w${n}`, path: `w${n}.waited_ms`, exists: true })) },
    }));
    expect(cut.result.phase).toBe('failed');
    expect(JSON.stringify(cut.result.envelope)).toMatch(/cut off at the run's deadline/);
  });

  it('the default step limit is 20', async () => {
    const h = harness();
    const script = Array.from({ length: 30 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `n${i}` } }));
    const { result } = await runCard(h, card({ allowed_tools: ['echo'], budget: { max_write_calls: 5 }, script }));
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'max_steps' });
    expect(result.envelope!.trace.step_count).toBe(20);
  });

  it('three consecutive observation failures end the run failed / max_failures', async () => {
    const h = harness();
    const { result } = await runCard(h, card({ allowed_tools: ['broken', 'noop'], observe: { tool: 'broken', args: {} }, script: [{ action: 'done' }] }));
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'max_failures' });
  });

  it('a failed tool call and a planner failure count together toward 3; a success resets the count', async () => {
    const h = harness();
    // broken fails, noop resets, broken fails twice more, then the script runs out (a planner failure).
    // Distinct args keep the repeat detector out of it; a high threshold keeps the breaker out.
    const { result, events } = await runCard(h, card({
      allowed_tools: ['broken', 'noop'],
      script: [
        { action: 'tool', tool: 'broken', args: { n: 1 } },
        { action: 'tool', tool: 'noop' },
        { action: 'tool', tool: 'broken', args: { n: 2 } },
        { action: 'tool', tool: 'broken', args: { n: 3 } },
      ],
    }), { breakerPolicy: { ...POLICY, threshold: 10 } });
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'max_failures' });
    const failed = events.flatMap((e) => (e.type === 'step_finished' && e.step.status === 'failed' ? [e.step.kind] : []));
    expect(failed).toEqual(['action', 'action', 'action', 'decide']);
  });

  it('an observe tool that recovers keeps the run going: two failed observations are not three', async () => {
    const h = harness();
    const { result } = await runCard(h, card({
      allowed_tools: ['flaky', 'noop'],
      observe: { tool: 'flaky', args: { label: `obs-${h.dir}`, fail_times: 2 } },
      script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
    }));
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
  });

  it('a successful observation does not make a failing planner look healthy: 3 failed decisions end the run, not 20', async () => {
    const h = harness();
    let calls = 0;
    const failing = { name: 'failing', decide: async () => { calls++; throw new PlannerError('malformed', 'not JSON'); } };
    const { result } = await runCard(h, card({ allowed_tools: ['noop'], observe: { tool: 'noop', args: {} } }), { planner: () => failing });
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'max_failures' });
    expect(calls).toBe(3);
    expect(result.envelope!.trace.step_count).toBe(3);
  });

  it('the planner saying fail ends the run failed / planner_fail with its reason', async () => {
    const h = harness();
    const { result } = await runCard(h, card({ script: [{ action: 'fail', reason: 'cannot be done' }] }));
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'planner_fail' });
    expect(result.envelope!.message).toBe('cannot be done');
  });

  it('an invalid card is rejected before anything runs, listing every problem', async () => {
    const h = harness();
    const { result, events, claim } = await runCard(h, { goal: '', allowed_tools: [], planner: 'scripted', script: [{ action: 'done' }] });
    expect(result).toMatchObject({ phase: 'rejected', stopReason: 'invalid_card' });
    expect(result.envelope!.message).toMatch(/goal: must not be empty.*allowed_tools.*acceptance.*budget/);
    expect(events.filter((e) => e.type === 'step_started')).toEqual([]);
    expect((await h.tm.getTask(claim.id)).state).toBe('failed');
  });

  it('refuses a call outside the allowlist, with bad arguments, or out of scope, and tells the planner why', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const seen: string[][] = [];
    const { result } = await runCard(h, card({
      allowed_tools: ['kv_set', 'noop'],
      scope: { keys: ['a'] },
      script: [
        { action: 'tool', tool: 'wait', args: { ms: 1 } },
        { action: 'tool', tool: 'kv_set', args: { file, key: 'a' , value: 1, extra: { nested: true } } },
        { action: 'tool', tool: 'kv_set', args: { file: 42, key: 'a' } },
        { action: 'tool', tool: 'kv_set', args: { file, key: 'b', value: 1 } },
        { action: 'done' },
      ],
    }), {
      // The scripted planner, watched: what did each decision hear about earlier refusals?
      planner: (c, made) => {
        const inner = createScriptedPlanner(c.script ?? [], made);
        return { name: 'spy', decide: async (input) => { seen.push(input.rejections.map((r) => r.reason)); return inner.decide(input); } };
      },
    });
    const rejected = result.envelope!.trace.rejected_calls.map((r) => r.reason);
    expect(rejected).toHaveLength(3);
    expect(rejected[0]).toMatch(/wait is not in the card's allowed_tools/);
    expect(rejected[1]).toMatch(/kv_set: argument file/);
    expect(rejected[2]).toMatch(/outside scope.keys/);
    expect(seen[1]![0]).toBe(rejected[0]); // the next decision saw the refusal
    expect(result.phase).toBe('completed');
  });

  it('a write past max_write_calls ends the run budget_exhausted / max_write_calls', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const { result } = await runCard(h, card({
      allowed_tools: ['log_append'],
      budget: { max_steps: 10, max_write_calls: 1 },
      script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'one' } }, { action: 'tool', tool: 'log_append', args: { file, line: 'two' } }],
    }));
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'max_write_calls' });
  });

  it('a tool whose output nests 10,000 levels deep fails its step; nothing recursive overflows', async () => {
    const h = harness();
    const { result, events } = await runCard(h, card({ allowed_tools: ['deep_output'], script: [{ action: 'tool', tool: 'deep_output', args: { depth: 10_000 } }, { action: 'done' }] }));
    const failed = events.find((e) => e.type === 'step_finished' && e.step.kind === 'action');
    expect(failed).toMatchObject({ step: { status: 'failed', error: expect.stringMatching(/deep_output: its output nests deeper than 64 levels/) } });
    expect(result.phase).toBe('completed');
  });

  it('enforces the per-tool timeout and output cap as failed steps', async () => {
    const h = harness();
    const { events } = await runCard(h, card({
      allowed_tools: ['stubborn', 'big_output'],
      script: [{ action: 'tool', tool: 'stubborn', args: { ms: 2000 } }, { action: 'tool', tool: 'big_output', args: { bytes: 5000 } }, { action: 'done' }],
    }));
    const errors = events.flatMap((e) => (e.type === 'step_finished' && e.step.kind === 'action' ? [e.step.error] : []));
    expect(errors[0]).toMatch(/stubborn: timed out after 200 ms/);
    expect(errors[1]).toMatch(/big_output: output of \d+ bytes exceeds the cap of 1024/);
  });

  it('checks the card’s observe arguments against the tool’s schema too', async () => {
    const h = harness();
    const { result, events } = await runCard(h, card({ allowed_tools: ['echo'], observe: { tool: 'echo', args: { text: 42 } }, script: [{ action: 'done' }] }));
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'max_failures' });
    const observed = events.find((e) => e.type === 'step_finished' && e.step.kind === 'observe');
    expect(observed).toMatchObject({ step: { status: 'failed', error: expect.stringContaining('echo: argument text') } });
  });
});
