/**
 * Whom a run's task tools act for. The calls are the model's, and a model is an agent: an
 * agent's card acts as its author, anyone else's as the runner that holds the claim. A
 * reviewer's card acted as the reviewer (loop-calls.ts took every role but operator and
 * system at its word), so its model read every task with its card, passed another agent's
 * work in review (recorded "by rita reviewer") and created at any priority. Found by
 * attacking the priority rule (session 27); the priority case is in priority.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createToolRegistry } from '../../src/tools/registry.js';
import { taskTools } from '../../src/tools/task-tools.js';
import { agent, operator } from '../helpers.js';
import { type Harness, card, drive, harness, loopContext } from '../workers/harness.js';

const rita = { id: 'rita', role: 'reviewer' } as const;

/** Runs a card that reviewer rita wrote, calling one task tool; its steps as they finished. */
async function reviewersRun(h: Harness, call: { tool: string; args: Record<string, unknown> }) {
  h.tools = createToolRegistry([...taskTools]);
  const c = card({ allowed_tools: [call.tool], script: [{ action: 'tool', ...call }, { action: 'done' }], budget: { max_steps: 5, max_failures: 2 } });
  const parent = (await h.tm.createTask({ title: "a reviewer's card", card: c }, rita)).task;
  const claim = (await h.tm.claimTask({ agent: 'worker', taskId: parent.id, start: true }))!;
  const { events } = await drive(loopContext(h, claim));
  return events.flatMap((e) => (e.type === 'step_finished' ? [{ status: e.step.status, error: e.step.error ?? '', result: JSON.stringify(e.step.result ?? null) }] : []));
}

describe('a run of a reviewer’s card', () => {
  it('reads another agent’s task as the runner would: FORBIDDEN, not the reviewer’s read-everything', async () => {
    const h = harness();
    const secret = (await h.tm.createTask({ title: 'bob private', card: card({ goal: 'SECRET-GOAL' }) }, agent('bob'))).task;
    await h.tm.claimTask({ agent: 'bob', taskId: secret.id });
    const steps = await reviewersRun(h, { tool: 'task_get', args: { task_id: secret.id } });
    expect(steps.filter((x) => x.status === 'failed').map((x) => x.error)).toEqual([expect.stringMatching(/^task_get: FORBIDDEN: task \d+ is not yours to read: agent worker /)]);
    expect(steps.filter((x) => x.result.includes('SECRET-GOAL'))).toEqual([]);
  });

  it('does not pass another agent’s work in review', async () => {
    const h = harness();
    const work = (await h.tm.createTask({ title: 'operator work' }, operator)).task;
    const held = (await h.tm.claimTask({ agent: 'mallory', taskId: work.id, start: true }))!;
    await h.tm.transitionTask({ taskId: work.id, claimToken: held.claimToken, to: 'review', actor: agent('mallory'), result: { done: 'trust me' } });
    const steps = await reviewersRun(h, { tool: 'task_transition', args: { task_id: work.id, to: 'completed', reason: 'lgtm' } });
    expect(steps.filter((x) => x.status === 'failed').map((x) => x.error)).toEqual([expect.stringMatching(/^task_transition: FORBIDDEN: /)]);
    const after = await h.tm.getTask(work.id);
    expect(after.state).toBe('review');
    expect(after.events.filter((e) => e.actorRole === 'reviewer')).toEqual([]);
  });
});
