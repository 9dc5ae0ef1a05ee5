import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { card, harness, runCard } from './harness.js';

function kvCard(file: string, script: unknown[], extra: Record<string, unknown> = {}) {
  return card({
    allowed_tools: ['kv_get', 'kv_set'],
    scope: { keys: ['status'] },
    observe: { tool: 'kv_get', args: { file, key: 'status' } },
    final_state: { status: { tool: 'kv_get', args: { file, key: 'status' } } },
    acceptance: { checks: [{ id: 'closed', path: 'status.value', equals: 'closed' }, { id: 'tools_ok', tools_subset: true }] },
    script,
    ...extra,
  });
}

describe('how a run ends', () => {
  it('done with a final state that passes acceptance completes the task, with the report in the envelope', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    const { result, claim } = await runCard(h, kvCard(file, [{ action: 'tool', tool: 'kv_set', args: { file, key: 'status', value: 'closed' } }, { action: 'done' }]));
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    const env = result.envelope!;
    expect(env).toMatchObject({
      run_id: result.runId,
      task_id: claim.id,
      acceptance: { verdict: 'passed', final_state: { status: { value: 'closed' } } },
      side_effects: [{ tool: 'kv_set', status: 'done' }],
      trace: { used_tools: ['kv_get', 'kv_set'], rejected_calls: [], pending_ids: [], step_count: 2 },
      safe_resume: { condition: expect.any(String), checkpoint_version: expect.any(Number) },
    });
    const task = await h.tm.getTask(claim.id);
    expect(task.state).toBe('completed');
    expect(task.result).toEqual(env);
    const moves = task.events.filter((e) => e.type === 'task.transitioned').map((e) => `${e.data.to} by ${e.actor}`);
    expect(moves).toEqual(['in_progress by worker', 'review by worker', 'completed by acceptance']);
  });

  it('a planner that says done while the final state disagrees ends failed, whatever it claims', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    writeFileSync(file, JSON.stringify({ status: 'open' }));
    const { result, claim } = await runCard(h, kvCard(file, [{ action: 'done', reason: 'I closed it, trust me' }]));
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'acceptance_failed' });
    expect(result.envelope!.acceptance).toMatchObject({ verdict: 'failed', failed: ['closed'] });
    const task = await h.tm.getTask(claim.id);
    expect(task.state).toBe('failed');
    expect(task.events.at(-1)).toMatchObject({ actor: 'acceptance', data: { from: 'review', to: 'failed' } });
  });

  it('manual acceptance items leave the task in review for a person', async () => {
    const h = harness();
    const { result, claim } = await runCard(h, card({ acceptance: { checks: [], manual: ['tone_review'] } }));
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'await_manual' });
    expect((await h.tm.getTask(claim.id)).state).toBe('review');
  });

  it('a command check runs on an operator’s card', async () => {
    const h = harness();
    const c = card({ acceptance: { checks: [{ id: 'cmd', command: [process.execPath, '-e', 'process.exit(0)'] }] } });
    expect((await runCard(h, c)).result.phase).toBe('completed');
  });

  it('a command check gets the environment without the HTTP server\'s tokens (its output is kept where reviewers read it)', async () => {
    const h = harness();
    const saved = { TASKLOOP_TOKEN: process.env.TASKLOOP_TOKEN, TASKLOOP_TOKENS: process.env.TASKLOOP_TOKENS };
    process.env.TASKLOOP_TOKEN = 'operator-secret-token-123456';
    process.env.TASKLOOP_TOKENS = 'agent:a1:agent-secret-token-123456';
    try {
      const names = ['TASKLOOP_TOKEN', 'TASKLOOP_TOKENS', 'PATH'];
      const c = card({ acceptance: { checks: [{ id: 'env', command: [process.execPath, '-e', `console.log(${JSON.stringify(names)}.map((n) => n + '=' + (n in process.env)).join(' '))`] }] } });
      const { result } = await runCard(h, c);
      expect(result.phase).toBe('completed');
      expect((result.envelope!.acceptance as { checks: unknown[] }).checks).toEqual([{ id: 'env', passed: true, detail: 'exit 0: TASKLOOP_TOKEN=false TASKLOOP_TOKENS=false PATH=true' }]);
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('the same call against the same state three times is a loop: blocked / loop_detected (repeat)', async () => {
    const h = harness();
    const script = Array.from({ length: 5 }, () => ({ action: 'tool', tool: 'echo', args: { text: 'same' } }));
    const { result } = await runCard(h, card({ allowed_tools: ['echo'], script }));
    expect(result).toMatchObject({ phase: 'blocked', stopReason: 'loop_detected' });
    expect(result.envelope!.message).toMatch(/repeat/);
  });

  it('A-B-A-B with no write between is an oscillation', async () => {
    const h = harness();
    const a = { action: 'tool', tool: 'echo', args: { text: 'a' } };
    const b = { action: 'tool', tool: 'echo', args: { text: 'b' } };
    const { result } = await runCard(h, card({ allowed_tools: ['echo'], script: [a, b, a, b, a] }));
    expect(result.envelope!.message).toMatch(/oscillation/);
  });

  it('rounds that produce nothing new are no progress', async () => {
    const h = harness();
    // Each call differs, but every answer is refused by the allowlist: nothing happens.
    const script = Array.from({ length: 10 }, (_, i) => ({ action: 'tool', tool: 'wait', args: { ms: i } }));
    const { result } = await runCard(h, card({ allowed_tools: ['echo'], script, loop: { repeat_limit: 3, idle_rounds: 4 } }));
    expect(result).toMatchObject({ phase: 'blocked', stopReason: 'loop_detected' });
    expect(result.envelope!.message).toMatch(/no_progress/);
    expect(result.envelope!.trace.rejected_calls).toHaveLength(4);
  });
});
