import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cardSchema } from '../../src/engine/index.js';
import { type PlanState, MAX_REPLAN_ITEMS, planFromCard, recordPlanCall, replan } from '../../src/workers/plan.js';
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

describe('replans are parsed with the card\'s plan-item schema', () => {
  const look = { id: 'look', goal: 'read the status', allowed_actions: ['kv_get'], success_evidence: ['kv_get'] };
  const close = { id: 'close', goal: 'set it closed', allowed_actions: ['kv_set'], success_evidence: ['kv_set'], failure_policy: { transient: 1 } };
  /** A plan whose first item is done (with evidence) and whose second has failed once. */
  function started(): PlanState {
    const plan = planFromCard(cardSchema.parse(card({ plan: [look, close] })));
    recordPlanCall(plan, 'kv_get', true, 3);
    recordPlanCall(plan, 'kv_set', false, 4);
    return plan;
  }

  /** Asserts the replan is refused with exactly `problems`, and the plan is as it was. */
  function refused(proposed: Record<string, unknown>, problems: string[]) {
    const plan = started();
    const before = structuredClone(plan);
    expect(replan(plan, proposed)).toEqual({ ok: false, problems });
    expect(plan).toEqual(before);
  }

  it('a planner cannot mark an item done, give it evidence or reset its failures', () => {
    refused({ plan: [look, { ...close, status: 'done' }] }, ['plan.1.status: kept by the loop from evidence; a replan may not set it']);
    refused({ plan: [look, { ...close, evidence: ['kv_set at step 9'] }] }, ['plan.1.evidence: kept by the loop from evidence; a replan may not set it']);
    refused({ plan: [look, { ...close, failures: -100 }] }, ['plan.1.failures: kept by the loop from evidence; a replan may not set it']);
  });

  it('failure_policy.transient stays within the card schema\'s bounds', () => {
    refused({ plan: [look, { ...close, failure_policy: { transient: 1e9 } }] }, ['plan.1.failure_policy.transient: Too big: expected number to be <=2']);
    refused({ plan: [look, { ...close, failure_policy: { transient: 2, retries: 50 } }] }, ['plan.1.failure_policy: Unrecognized key: "retries"']);
  });

  it('allowed_actions and success_evidence must be arrays of tool names, never strings matched by substring', () => {
    refused({ plan: [look, { ...close, allowed_actions: 'kv_set kv_get log_append' }] }, ['plan.1.allowed_actions: Invalid input: expected array, received string']);
    refused({ plan: [look, { ...close, success_evidence: 'kv_get' }] }, ['plan.1.success_evidence: Invalid input: expected array, received string']);
    refused({ plan: [look, { ...close, success_evidence: ['any call at all'] }] }, ['plan.1.success_evidence.0: a tool name (lowercase letters, digits, _)']);
  });

  it('a field the card schema does not have is refused', () => {
    refused({ plan: [look, { ...close, scope: { keys: ['owner'] } }] }, ['plan.1: Unrecognized key: "scope"']);
    refused({ plan: [look, 'close it'] }, ['plan.1: a plan item is an object with an id and a goal']);
    refused({ plan: [look, { goal: 'no id' }] }, ['plan.1.id: Invalid input: expected string, received undefined']);
  });

  it('items already done cannot be removed or rewritten, and ids are unique', () => {
    refused({ plan: [close] }, ['plan: a replan may not drop done items (look)']);
    refused({ plan: [{ ...look, goal: 'read nothing', success_evidence: ['kv_set'] }, close] }, ['plan.0: plan item look is done and may not be rewritten (goal, success_evidence changed)']);
    refused({ plan: [look, close, { ...close, goal: 'again' }] }, ['plan.2.id: plan item close appears twice']);
    refused({ plan: Array.from({ length: MAX_REPLAN_ITEMS + 1 }, (_, i) => ({ id: `i${i}`, goal: 'g' })) }, [`plan: a replan may propose at most ${MAX_REPLAN_ITEMS} items, not ${MAX_REPLAN_ITEMS + 1}`]);
  });

  it('immutable constraints stay refused alongside the plan', () => {
    refused({ plan: [look, close], budget: { max_steps: 500 }, allowed_tools: ['log_append'] }, ['replanning may not change budget', 'replanning may not change allowed_tools']);
  });

  it('an accepted replan keeps done items with their evidence and carries an item\'s failure count', () => {
    const plan = started();
    const lookBefore = structuredClone(plan.items[0]);
    expect(replan(plan, { plan: [look, { ...close, goal: 'set it closed, carefully' }, { id: 'tell', goal: 'say so', allowed_actions: ['echo'] }] })).toEqual({ ok: true });
    expect(plan.version).toBe(1);
    expect(plan.items[0]).toEqual(lookBefore);
    expect(plan.items[0]).toMatchObject({ status: 'done', evidence: ['kv_get at step 3'] });
    expect(plan.items[1]).toMatchObject({ id: 'close', goal: 'set it closed, carefully', failures: 1, transient: 1, status: 'in_progress' });
    expect(plan.items[2]).toMatchObject({ id: 'tell', status: 'pending', failures: 0, transient: 2, evidence: [] });
  });

  it('in a run, a replan that marks items done is refused with its problem and the plan still asks for evidence', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const set = { action: 'tool', tool: 'kv_set', args: { file, key: 'status', value: 'closed' } };
    const forged = { action: 'replan', card: { plan: [{ ...look, status: 'done' }, { ...close, allowed_actions: 'kv_set kv_get' }] } };
    const { result } = await runCard(h, planCard(file, { script: [forged, set, { action: 'tool', tool: 'kv_get', args: { file, key: 'status' } }, set, { action: 'done' }] }));
    const rejected = result.envelope!.trace.rejected_calls.map((r) => r.reason);
    expect(rejected[0]).toBe('plan.0.status: kept by the loop from evidence; a replan may not set it; plan.1.allowed_actions: Invalid input: expected array, received string');
    expect(rejected[1]).toBe('kv_set is not an allowed action of plan item look (kv_get)');
    expect(result.phase).toBe('completed');
    expect(result.envelope!.goal_progress).toEqual({ completed: ['look', 'close'], pending: [] });
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
