import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLlmPlanner } from '../../src/workers/planners/llm.js';
import { startOpenAiServer } from '../fixtures/openai-server.js';
import { card, harness, runCard } from './harness.js';

function planCard(file: string, over: Record<string, unknown> = {}) {
  return card({
    allowed_tools: ['kv_get', 'kv_set', 'broken'],
    scope: { keys: ['status'] },
    budget: { max_steps: 20, max_write_calls: 5 },
    plan: [
      { id: 'look', goal: 'read the status', allowed_actions: ['kv_get'], success_evidence: ['kv_get'] },
      { id: 'close', goal: 'set it closed', allowed_actions: ['kv_set'], success_evidence: ['kv_set'] },
    ],
    final_state: { status: { tool: 'kv_get', args: { file, key: 'status' } } },
    acceptance: { checks: [{ id: 'closed', path: 'status.value', equals: 'closed' }] },
    ...over,
  });
}

describe('plans and progress', () => {
  it('the current plan item narrows the allowlist; evidence completes items; progress rides on every step and the envelope', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const set = { action: 'tool', tool: 'kv_set', args: { file, key: 'status', value: 'closed' } };
    const { result, claim } = await runCard(h, planCard(file, { script: [set, { action: 'tool', tool: 'kv_get', args: { file, key: 'status' } }, set, { action: 'done' }] }));
    expect(result.phase).toBe('completed');
    const env = result.envelope!;
    expect(env.trace.rejected_calls[0]!.reason).toBe('kv_set is not an allowed action of plan item look (kv_get)');
    expect(env.goal_progress).toEqual({ completed: ['look', 'close'], pending: [] });
    expect(env.progress).toMatchObject({ subgoals_done: 2, subgoals_total: 2, verified_evidence: 2, state_version: 1, consecutive_failures: 0 });
    const finished = (await h.tm.getTask(claim.id)).events.filter((e) => e.type === 'run.step_finished');
    expect(finished.every((e) => typeof (e.data.progress as { subgoals_total?: number } | undefined)?.subgoals_total === 'number')).toBe(true);
    expect(finished.map((e) => (e.data.progress as { subgoals_done: number }).subgoals_done)).toContain(1);
  });

  it('a failing plan item is retried at most twice, then the run fails', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const broken = (n: number) => ({ action: 'tool', tool: 'broken', args: { n } });
    const { result } = await runCard(h, planCard(file, {
      plan: [{ id: 'probe', goal: 'probe the service', allowed_actions: ['broken'], success_evidence: ['broken'] }],
      script: [broken(1), broken(2), broken(3), broken(4)],
    }), { breakerPolicy: { threshold: 10, cooldownMs: 300_000, probeTimeoutMs: 60_000 } });
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'plan_item_failed' });
    expect(result.envelope!.message).toMatch(/plan item probe failed 3 times \(2 retries allowed\)/);
  });

  it('replanning may change plan items but never scope, allowlist, budget, approvals or termination rules', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const attempts = [
      { scope: { keys: ['status', 'owner'] } },
      { allowed_tools: ['kv_get', 'kv_set', 'log_append'] },
      { budget: { max_steps: 500 } },
      { approval: { tools: [] } },
      { loop: { repeat_limit: 100, idle_rounds: 1000 } },
      { acceptance: { checks: [] } },
    ];
    const script = [
      ...attempts.map((change) => ({ action: 'replan', card: { ...change, plan: [] } })),
      { action: 'replan', card: { plan: [{ id: 'close', goal: 'set it closed right away', allowed_actions: ['kv_set'], success_evidence: ['kv_set'] }] } },
      { action: 'tool', tool: 'kv_set', args: { file, key: 'status', value: 'closed' } },
      { action: 'done' },
    ];
    const { result } = await runCard(h, planCard(file, { script, loop: { repeat_limit: 3, idle_rounds: 20 } }));
    const refusals = result.envelope!.trace.rejected_calls.filter((r) => r.tool === 'replan').map((r) => r.reason);
    expect(refusals).toEqual(['scope', 'allowed_tools', 'budget', 'approval', 'loop', 'acceptance'].map((k) => `replanning may not change ${k}`));
    expect(result.phase).toBe('completed');
    expect(result.envelope!.goal_progress).toEqual({ completed: ['close'], pending: [] });
  });
});

describe('plans with the llm planner', () => {
  it('the model sees the plan and may replace it; the replan passes the same rules as a scripted one', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const newPlan = { plan: [{ id: 'close', goal: 'set it closed right away', allowed_actions: ['kv_set'], success_evidence: ['kv_set'] }] };
    const server = await startOpenAiServer([
      // No plan in args: a malformed replan, counted as a planner failure.
      { json: { action: 'replan', tool: null, args: JSON.stringify({ steps: [] }), reason: 'wrong shape' } },
      { json: { action: 'replan', tool: null, args: JSON.stringify({ ...newPlan, budget: { max_steps: 500 } }), reason: 'also more budget' } },
      { json: { action: 'replan', tool: null, args: JSON.stringify(newPlan), reason: 'the status needs no reading' } },
      { json: { action: 'tool', tool: 'kv_set', args: JSON.stringify({ file, key: 'status', value: 'closed' }), reason: 'close it' } },
      { json: { action: 'done', tool: null, args: null, reason: 'closed' } },
    ]);
    const { result } = await runCard(h, planCard(file, { planner: 'llm', model: 'test-model' }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'test', model: c.model }),
    });
    await server.close();
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(result.envelope!.goal_progress).toEqual({ completed: ['close'], pending: [] });
    expect(result.envelope!.trace.rejected_calls.map((r) => [r.tool, r.reason])).toEqual([['replan', 'replanning may not change budget']]);
    const requests = server.requests as Array<{ messages: Array<{ role: string; content: string }>; response_format: { json_schema: { schema: { properties: { action: { enum: string[] } } } } } }>;
    expect(requests).toHaveLength(5);
    expect(requests[0]!.response_format.json_schema.schema.properties.action.enum).toEqual(['tool', 'done', 'fail', 'replan']);
    expect(requests[0]!.messages[0]!.content).toContain('"action": "replan"');
    expect(requests[0]!.messages[1]!.content).toContain('## Plan\n- look [pending]: read the status (allowed: kv_get; evidence: kv_get)\n- close [pending]');
    // After the accepted replan the model is shown the new plan.
    expect(requests[3]!.messages[1]!.content).toContain('## Plan\n- close [pending]: set it closed right away');
    expect(requests[1]!.messages[1]!.content).toMatch(/#\d+ decide failed → error: llm planner: args: a replan needs args/);
  });

  it('a card without a plan offers no replan, and a model that answers one anyway fails the decision', async () => {
    const h = harness();
    const server = await startOpenAiServer([
      { json: { action: 'replan', tool: null, args: JSON.stringify({ plan: [] }), reason: 'a plan of my own' } },
      { json: { action: 'done', tool: null, args: null, reason: 'nothing to do' } },
    ]);
    const { result } = await runCard(h, card({ planner: 'llm', model: 'test-model', script: undefined }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'test', model: c.model }),
    });
    await server.close();
    expect(result.phase).toBe('completed');
    const requests = server.requests as Array<{ messages: Array<{ role: string; content: string }>; response_format: { json_schema: { schema: { properties: { action: { enum: string[] } } } } } }>;
    expect(requests[0]!.response_format.json_schema.schema.properties.action.enum).toEqual(['tool', 'done', 'fail']);
    expect(requests[0]!.messages[0]!.content).not.toContain('replan');
    expect(requests[1]!.messages[1]!.content).toContain('#1 decide failed → error: llm planner: the model answered "replan", but this card has no plan to replace');
  });
});
