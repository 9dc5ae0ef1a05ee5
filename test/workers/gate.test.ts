import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type TaskCard, checkCard } from '../../src/engine/index.js';
import { type Plugin, createHookRegistry } from '../../src/plugins/hooks.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { GATE_LINKS, type GateInput, gate } from '../../src/workers/gate.js';
import { POLICY, drive, harness, loopContext } from './harness.js';

const operator = { id: 'operator', role: 'operator' } as const;

/** A plugin whose tool_before hook does what `decide` says at the time of the call. */
function switchable(decide: () => 'pass' | 'block' | 'rewrite'): Plugin {
  return {
    name: 'switch',
    register(api) {
      api.on('tool_before', (call) => {
        const what = decide();
        if (what === 'block') return { block: 'not now' };
        if (what === 'rewrite') return { args: { ...call.args, message: 'rewritten by a hook' } };
        return undefined;
      });
    },
  };
}

describe('the gate: one ordered chain', () => {
  it('refuses at the first link a call fails, in the order allowlist → arguments → scope → budget → breaker → hooks → approval', async () => {
    const faults = GATE_LINKS.length;
    const seen: string[] = [];
    for (let fixed = 0; fixed <= faults; fixed++) {
      const h = harness();
      const broken = (link: (typeof GATE_LINKS)[number]) => GATE_LINKS.indexOf(link) >= fixed;
      const file = join(h.dir, 'kv.json');
      if (broken('breaker')) for (let i = 0; i < 3; i++) await h.runs.breakerRecord('kv_set', false, POLICY);
      const hooks = createHookRegistry();
      await hooks.use(switchable(() => (broken('hooks') ? 'block' : 'pass')));
      const parsed = checkCard({
        goal: 'g',
        planner: 'scripted',
        allowed_tools: broken('allowlist') ? ['noop'] : ['noop', 'kv_set'],
        scope: { keys: ['a'] },
        budget: { max_steps: 10, max_write_calls: 2 },
        acceptance: { checks: [{ id: 'ok', tools_subset: true }] },
        script: [{ action: 'done' }],
        ...(broken('approval') ? { approval: { tools: ['kv_set'] } } : {}),
      });
      expect(parsed.ok).toBe(true);
      const input: GateInput = {
        card: (parsed as { card: TaskCard }).card,
        tools: h.tools,
        runs: h.runs,
        breakerPolicy: POLICY,
        budget: { maxSteps: 10, maxFailures: 3, maxWriteCalls: 2, maxPending: null, deadlineAt: null, maxTokens: null, maxCost: null },
        usage: { steps: 0, writeCalls: broken('budget') ? 2 : 0, pending: 0, tokens: 0, cost: 0, consecutiveFailures: 0 },
        now: Date.now,
        toolName: 'kv_set',
        rawArgs: broken('arguments') ? { key: 'a', value: 1 } : { file, key: broken('scope') ? 'b' : 'a', value: 1 },
        hooks,
        call: { taskId: 1, runId: 1, agent: 'worker', card: {}, signal: new AbortController().signal, services: {} },
      };
      const verdict = await gate(input);
      seen.push(verdict.kind === 'refuse' ? verdict.link : verdict.kind);
    }
    expect(seen).toEqual(['allowlist', 'arguments', 'scope', 'budget', 'breaker', 'hooks', 'park', 'run']);
  });
});

describe('the deadline at the gate', () => {
  it('refuses a new write once the deadline passed, but not a begun call carried on under its key, nor a read', async () => {
    const h = harness();
    const parsed = checkCard({
      goal: 'g', planner: 'scripted', allowed_tools: ['noop', 'kv_set'], scope: { keys: ['a'] },
      budget: { max_steps: 10, max_write_calls: 2, deadline: '1m' }, acceptance: { checks: [{ id: 'ok', tools_subset: true }] }, script: [{ action: 'done' }],
    });
    const now = Date.now();
    const input = (toolName: string, rawArgs: unknown, continued?: boolean): GateInput => ({
      card: (parsed as { card: TaskCard }).card,
      tools: h.tools,
      runs: h.runs,
      breakerPolicy: POLICY,
      budget: { maxSteps: 10, maxFailures: 3, maxWriteCalls: 2, maxPending: null, deadlineAt: now - 1, maxTokens: null, maxCost: null },
      usage: { steps: 0, writeCalls: 0, pending: 0, tokens: 0, cost: 0, consecutiveFailures: 0 },
      now: () => now,
      toolName,
      rawArgs,
      hooks: createHookRegistry(),
      call: { taskId: 1, runId: 1, agent: 'worker', card: {}, signal: new AbortController().signal, services: {} },
      ...(continued === undefined ? {} : { continued }),
    });
    const write = { file: join(h.dir, 'kv.json'), key: 'a', value: 1 };
    expect(await gate(input('kv_set', write))).toMatchObject({ kind: 'refuse', link: 'budget', end: { phase: 'budget_exhausted', stopReason: 'deadline' } });
    expect((await gate(input('kv_set', write, true))).kind).toBe('run');
    expect((await gate(input('noop', {}))).kind).toBe('run');

    // Inside the deadline when the gate starts, past it once a slow tool_before hook answers.
    let clock = now - 1000;
    const hooks = createHookRegistry();
    await hooks.use({ name: 'slow', register: (api) => api.on('tool_before', () => void (clock = now + 1)) });
    const slow = { ...input('kv_set', write), budget: { ...input('kv_set', write).budget, deadlineAt: now }, now: () => clock, hooks };
    expect(await gate(slow)).toMatchObject({ kind: 'refuse', link: 'budget', end: { stopReason: 'deadline' } });
  });
});

describe('an approved call passes the whole gate again when its run resumes', () => {
  async function parkedTicket(decide: () => 'pass' | 'block' | 'rewrite') {
    const h = harness();
    const tickets = ticketStoreFor(h.tm.store);
    await tickets.seed();
    await h.tm.createTask({ title: 'ticket', card: ticketCard('T-1024') }, operator);
    const hooks = createHookRegistry();
    await hooks.use(switchable(decide));
    const run = async (now: () => number = Date.now) => drive(loopContext(h, (await h.tm.claimTask({ agent: 'worker', start: true }))!, { hooks, now }));
    const parked = await run();
    expect(parked.result.phase).toBe('waiting_approval');
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    return { h, tickets, approval: approval!, run };
  }

  it('a breaker that opened during the wait refuses it: the run ends failed / breaker and on-call is not paged', async () => {
    const { h, tickets, approval, run } = await parkedTicket(() => 'pass');
    for (let i = 0; i < 3; i++) await h.runs.breakerRecord('notify_oncall', false, POLICY);
    const resumed = await run();
    expect(resumed.result).toMatchObject({ phase: 'failed', stopReason: 'breaker' });
    expect(await tickets.get('T-1024')).toMatchObject({ notified: false });
    expect(await h.runs.getApproval(approval.id)).toMatchObject({ state: 'approved' }); // not used
  });

  it('a call approved after the run’s deadline passed is not carried out: the run ends budget_exhausted / deadline', async () => {
    const { h, tickets, approval, run } = await parkedTicket(() => 'pass');
    // The card's deadline is 10m; the person approves 11 minutes after the run began.
    const late = Date.now() + 11 * 60_000;
    // The approval lapses at the run's deadline (10m), not at its own expires_in (30m).
    const run0 = (await h.runs.getRun(approval.runId));
    expect(approval.expiresAt).toBe(run0.budget.deadlineAt);
    const resumed = await run(() => late);
    expect(resumed.result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    expect(await tickets.get('T-1024')).toMatchObject({ notified: false });
    const parkedStep = (await h.runs.getRun(approval.runId)).steps.find((s) => s.id === approval.stepId)!;
    expect(parkedStep).toMatchObject({ status: 'rejected' });
    expect(parkedStep.error).toMatch(/^the run's deadline passed \d+ s ago: no write starts after it$/);
    expect(await h.runs.getApproval(approval.id)).toMatchObject({ state: 'approved' }); // not used
  });

  it('a tool_before hook that blocks on resume refuses it (the task_enforcer and every plugin see approved calls)', async () => {
    let blocking = false;
    const { tickets, run } = await parkedTicket(() => (blocking ? 'block' : 'pass'));
    blocking = true;
    const resumed = await run();
    expect(await tickets.get('T-1024')).toMatchObject({ notified: false });
    expect(JSON.stringify(resumed.result.envelope?.trace.rejected_calls ?? [])).toContain('blocked by plugin switch: not now');
  });

  it('a call rewritten after its approval no longer matches the approved fingerprint and is refused', async () => {
    let rewriting = false;
    const { h, tickets, approval, run } = await parkedTicket(() => (rewriting ? 'rewrite' : 'pass'));
    rewriting = true;
    const resumed = await run();
    expect(await tickets.get('T-1024')).toMatchObject({ notified: false });
    const steps = (await h.runs.getRun(approval.runId)).steps;
    const parkedStep = steps.find((s) => s.id === approval.stepId)!;
    expect(parkedStep).toMatchObject({ status: 'rejected' });
    expect(parkedStep.error).toMatch(new RegExp(`does not match approval ${approval.id}`));
    expect(resumed.result.envelope).not.toBeNull();
  });
});
