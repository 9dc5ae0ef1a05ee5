/**
 * Reading is authority: an agent reads only the tasks it created, holds or may claim now
 * (authority.ts mayRead). Two ways around it:
 *
 * 1. A confused deputy. The task tools inside a run act as the agent that runs the card
 *    (`ctx.agent` = the daemon's, or the HTTP server's `http-<host>-<pid>`), not as the card's
 *    author. So an agent writes a card whose steps are `task_list` / `task_get` (or
 *    `task_claim`), has a daemon or the server run it, and reads the results of its own run:
 *    everything the runner may read — every task it ever held, tasks reserved for it by
 *    `for_agent` — cards and results included.
 * 2. A stream opened while the task was readable keeps delivering after it is not:
 *    GET /api/tasks/:id/events on a pending task (readable: anyone may claim it) goes on
 *    streaming the steps, arguments and results of the run of whoever claims it.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { OPERATOR } from '../../src/engine/index.js';
import { builtInTools } from '../../src/tools/builtin.js';
import { createToolRegistry, defineTool } from '../../src/tools/registry.js';
import { agent, operator } from '../helpers.js';
import { api, bearer, card, openStream, startServer } from '../monitor/http-helpers.js';
import { type Harness, card as loopCard, drive, harness, loopContext } from '../workers/harness.js';

const OP = 'operator-token-0123456789';
const MALLORY = 'mallory-token-012345678';
const tokens = () => new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]);

/** A call's refusal as one line with the task's id written N, to compare refusals across tasks. */
const answer = (call: Promise<unknown>, id: number): Promise<string> =>
  call.then(() => 'accepted', (err: { code: string; message: string }) => `${err.code}: ${err.message.replace(String(id), 'N')}`);

/** The operator's tasks an agent may not read: in progress for 'worker', cancelled, completed. */
async function othersTasks(h: Harness): Promise<{ held: number; cancelled: number; completed: number }> {
  const made = async (title: string) => (await h.tm.createTask({ title, card: loopCard() }, operator)).task.id;
  const held = await made('held');
  await h.tm.claimTask({ agent: 'worker', taskId: held, start: true });
  const cancelled = await made('cancelled');
  await h.tm.cancelTask({ taskId: cancelled, actor: operator });
  const completed = await made('completed');
  const claim = (await h.tm.claimTask({ agent: 'worker', taskId: completed, start: true }))!;
  await h.tm.transitionTask({ taskId: completed, to: 'review', actor: agent('worker'), claimToken: claim.claimToken });
  await h.tm.transitionTask({ taskId: completed, to: 'completed', actor: operator });
  return { held, cancelled, completed };
}

describe('an agent cannot read through the agent that runs its card', () => {
  it('over HTTP: an agent’s attached card that calls task_list / task_get learns nothing of the operator’s tasks', async () => {
    const { url } = await startServer({ tokens: tokens() });
    const op = { url, headers: bearer(OP) };
    const mallory = { url, headers: bearer(MALLORY) };
    const secret = (await api(op, 'POST', '/api/tasks', { title: 'payroll', card: card({ goal: 'SECRET-GOAL-42' }) })).json.id as number;
    await (await openStream(`${url}/api/tasks/${secret}/events`, bearer(OP))).ended;
    // Mallory may not read it herself…
    expect((await api(mallory, 'GET', `/api/tasks/${secret}`)).status).toBe(403);

    // …so she has the server read it for her.
    const evil = await api(mallory, 'POST', '/api/tasks', {
      title: 'innocent',
      card: card({
        allowed_tools: ['task_list', 'task_get'],
        script: [
          { action: 'tool', tool: 'task_list', args: { states: ['completed'] } },
          { action: 'tool', tool: 'task_get', args: { task_id: secret } },
          { action: 'done' },
        ],
      }),
    });
    expect(evil.status).toBe(201);
    const stream = await openStream(`${url}/api/tasks/${evil.json.id}/events`, bearer(MALLORY));
    await stream.ended;
    const mine = await api(mallory, 'GET', `/api/tasks/${evil.json.id}`);
    const seen = [JSON.stringify(stream.events), JSON.stringify(mine.json)];
    for (const run of mine.json.runs ?? []) seen.push(JSON.stringify((await api(mallory, 'GET', `/api/runs/${run.id}`)).json));
    expect(seen.join('\n')).not.toContain('SECRET-GOAL-42');
  });

  it('on a daemon: an agent’s card run by the worker neither reads nor claims a task reserved for that worker', async () => {
    const h = harness();
    const reserved = (await h.tm.createTask({ title: 'for the worker only', card: loopCard({ goal: 'RESERVED-FOR-WORKER' }), forAgent: 'worker' }, operator)).task.id;
    // Mallory may not read it…
    await expect(h.tm.getTask(reserved, { as: agent('mallory') })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    // …but the worker runs her card, and her card asks as the worker.
    await h.tm.createTask({
      title: 'innocent',
      card: loopCard({
        allowed_tools: ['task_get', 'task_claim'],
        script: [
          { action: 'tool', tool: 'task_get', args: { task_id: reserved } },
          { action: 'tool', tool: 'task_claim', args: { task_id: reserved } },
          { action: 'done' },
        ],
      }),
    }, agent('mallory'));
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true, taskId: 2 }))!;
    await drive(loopContext(h, claim));

    const run = await h.runs.getRun((await h.runs.runsOf(claim.id))[0]!.id);
    expect(JSON.stringify(run.steps)).not.toContain('RESERVED-FOR-WORKER');
    expect((await h.tm.getTask(reserved)).state).toBe('pending');
  });
});

describe('a stream stops when its reader loses the right to read', () => {
  it('GET /api/tasks/:id/events opened on a pending task does not carry another agent’s run of it', async () => {
    const { url, tm, runs } = await startServer({ tokens: tokens() });
    const op = { url, headers: bearer(OP) };
    const id = (await api(op, 'POST', '/api/tasks', {
      title: 'ops',
      attach: false,
      card: card({ allowed_tools: ['echo'], script: [{ action: 'tool', tool: 'echo', args: { text: 'SECRET-STEP-ARG' } }, { action: 'done' }] }),
    })).json.id as number;
    // Pending, for anyone: Mallory may read it now, and opens its stream.
    const stream = await openStream(`${url}/api/tasks/${id}/events`, bearer(MALLORY));
    expect(stream.status).toBe(200);

    // Another agent claims it: from now on Mallory may not read it.
    const h = { tm, runs, tools: createToolRegistry(builtInTools()) } as unknown as Parameters<typeof loopContext>[0];
    const claim = (await tm.claimTask({ agent: 'worker', start: true }))!;
    expect((await api({ url, headers: bearer(MALLORY) }, 'GET', `/api/tasks/${id}`)).status).toBe(403);
    await drive(loopContext(h, claim));
    await Promise.race([stream.ended, new Promise((r) => setTimeout(r, 1000))]);
    stream.close();

    expect(JSON.stringify(stream.events)).not.toContain('SECRET-STEP-ARG');
  });
});

describe('a cancel of a task the agent may not read', () => {
  it('answers the same FORBIDDEN whatever the task’s state, and changes nothing', async () => {
    const h = harness();
    const made = async (title: string) => (await h.tm.createTask({ title, card: loopCard() }, operator)).task.id;
    const held = await made('held by the worker');
    await h.tm.claimTask({ agent: 'worker', taskId: held });
    const done = await made('completed');
    await h.tm.transitionTask({ taskId: done, to: 'cancelled', actor: operator });
    const answers = [];
    for (const id of [held, done]) {
      const before = await h.tm.getTask(id);
      const refused = await h.tm.cancelTask({ taskId: id, actor: agent('mallory') }).catch((err: { code: string; message: string }) => err);
      answers.push([(refused as { code: string }).code, (refused as { message: string }).message.replace(String(id), 'N')]);
      const after = await h.tm.getTask(id);
      expect([after.state, after.events.length]).toEqual([before.state, before.events.length]);
    }
    // The move's own refusal told the two apart (FORBIDDEN against INVALID_TRANSITION from cancelled).
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0]![0]).toBe('FORBIDDEN');
    // Her own task she may still cancel.
    const hers = (await h.tm.createTask({ title: 'mine', card: loopCard() }, agent('mallory'))).task.id;
    expect((await h.tm.cancelTask({ taskId: hers, actor: agent('mallory') })).state).toBe('cancelled');
  });
});

describe('any move of a task the agent may not read', () => {
  it('answers one FORBIDDEN whatever the task’s state or the move asked; a made-up claim token or a heartbeat learns no state', async () => {
    const h = harness();
    const made = async (title: string) => (await h.tm.createTask({ title, card: loopCard() }, operator)).task.id;
    const held = await made('in progress for the worker');
    const heldClaim = (await h.tm.claimTask({ agent: 'worker', taskId: held, start: true }))!;
    const inReview = await made('in review');
    const reviewClaim = (await h.tm.claimTask({ agent: 'worker', taskId: inReview, start: true }))!;
    await h.tm.transitionTask({ taskId: inReview, to: 'review', actor: agent('worker'), claimToken: reviewClaim.claimToken });
    const done = await made('completed');
    const doneClaim = (await h.tm.claimTask({ agent: 'worker', taskId: done, start: true }))!;
    await h.tm.transitionTask({ taskId: done, to: 'review', actor: agent('worker'), claimToken: doneClaim.claimToken });
    await h.tm.transitionTask({ taskId: done, to: 'completed', actor: operator });

    const answers = new Set<string>();
    for (const id of [held, inReview, done]) {
      const before = await h.tm.getTask(id);
      for (const to of ['completed', 'failed', 'review', 'in_progress', 'pending', 'waiting'] as const) {
        answers.add(await answer(h.tm.transitionTask({ taskId: id, to, actor: agent('mallory') }), id));
      }
      answers.add(await answer(h.tm.claimTask({ agent: 'mallory', taskId: id }), id));
      // A token she made up: the claim is not hers; whether the task is open or over is not said.
      const stale = await h.tm.transitionTask({ taskId: id, to: 'review', actor: agent('mallory'), claimToken: 'made-up' }).catch((err: { code: string; data: unknown }) => err);
      expect(stale).toMatchObject({ code: 'STALE_CLAIM', data: { task_id: id } });
      expect((stale as { data: Record<string, unknown> }).data).not.toHaveProperty('state');
      // A heartbeat said "completed and holds no lease" of a finished task, STALE_CLAIM of an open one.
      answers.add(await answer(h.tm.heartbeat({ taskId: id, agent: 'mallory', claimToken: 'made-up' }), id));
      const after = await h.tm.getTask(id);
      expect([after.state, after.events.length]).toEqual([before.state, before.events.length]);
    }
    // A claim by id of a task reserved for another agent named that agent.
    const reserved = (await h.tm.createTask({ title: 'for the worker', card: loopCard(), forAgent: 'worker' }, operator)).task.id;
    answers.add(await answer(h.tm.claimTask({ agent: 'mallory', taskId: reserved }), reserved));
    expect((await h.tm.getTask(reserved)).state).toBe('pending');
    // Before, the state machine's refusals told the states apart (INVALID_TRANSITION from a
    // terminal state, FORBIDDEN naming "from in_progress" or "from review").
    expect([...answers]).toHaveLength(2);
    expect([...answers][0]).toMatch(/^FORBIDDEN: task N is not yours to read/);
    expect([...answers][1]).toMatch(/^STALE_CLAIM: task N: claim token of mallory is not current/);

    // Those who may move it still can, and the holder's lost claim still says so with its state.
    expect((await h.tm.transitionTask({ taskId: held, to: 'review', actor: agent('worker'), claimToken: heldClaim.claimToken })).state).toBe('review');
    await expect(h.tm.transitionTask({ taskId: inReview, to: 'failed', actor: agent('worker'), claimToken: heldClaim.claimToken })).rejects.toMatchObject({
      code: 'STALE_CLAIM',
      data: { state: 'review' },
    });
  });
});

describe('a task an agent may claim, not its runs', () => {
  it('its events carry no call arguments or tool errors, its result no parked envelope, and claiming it shows no more', async () => {
    const h = harness();
    h.tools.register(defineTool({ name: 'lookup', description: 'A read that fails.', kind: 'read', args: z.object({}), execute: async () => { throw new Error('lookup failed for SSN 078-05-1120'); } }));
    h.tools.register(defineTool({ name: 'pay', description: 'A write.', kind: 'write', args: z.object({ to: z.string() }), execute: async ({ to }) => ({ paid: to }) }));
    const task = (await h.tm.createTask({
      title: 'payroll',
      card: loopCard({
        allowed_tools: ['lookup', 'pay'],
        approval: { tools: ['pay'] },
        script: [{ action: 'tool', tool: 'lookup', args: {} }, { action: 'tool', tool: 'pay', args: { to: 'SECRET-ACCOUNT-42' } }, { action: 'done' }],
      }),
    }, operator)).task;
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    expect((await drive(loopContext(h, claim))).result.phase).toBe('waiting_approval');
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    // Back to pending: every agent may read it (to decide whether to claim it).
    const seen = await h.tm.getTask(task.id, { as: agent('mallory') });
    expect(seen.state).toBe('pending');
    expect(seen.result).toBeNull();
    // The tool's error text and the call's arguments (an LLM's come from tool results, not
    // the card) are gone; which step of which run did what is still there.
    expect(JSON.stringify(seen.events)).not.toContain('078-05-1120');
    const requested = seen.events.find((e) => e.type === 'approval.requested')!.data;
    expect(requested).toMatchObject({ run_id: expect.any(Number), tool: 'pay' });
    expect(requested).not.toHaveProperty('args');
    // Its operator sees all of it.
    const full = await h.tm.getTask(task.id, { as: operator });
    expect(JSON.stringify(full.events)).toContain('078-05-1120');
    expect(full.events.find((e) => e.type === 'approval.requested')!.data).toHaveProperty('args');
    // Claiming it (any agent may) shows her no more.
    await h.tm.claimTask({ agent: 'mallory', taskId: task.id });
    expect(JSON.stringify((await h.tm.getTask(task.id, { as: agent('mallory') })).events)).not.toContain('078-05-1120');
  });

  it('a task back in the queue has no result: what its last holder or run left there goes', async () => {
    const h = harness();
    const id = (await h.tm.createTask({ title: 'parked', card: loopCard() }, operator)).task.id;
    const claim = (await h.tm.claimTask({ agent: 'worker', taskId: id, start: true }))!;
    // As a run parks waiting_input with its envelope (the calls' arguments) for its result.
    await h.tm.transitionTask({ taskId: id, to: 'waiting', actor: agent('worker'), claimToken: claim.claimToken, result: { side_effects: [{ args: { to: 'SECRET-ACCOUNT-42' } }] } });
    expect(JSON.stringify((await h.tm.getTask(id)).result)).toContain('SECRET-ACCOUNT-42');
    await h.tm.transitionTask({ taskId: id, to: 'pending', actor: operator, reason: 'resumed' });
    const listed = await h.tm.findTasks({ visibleTo: agent('mallory') });
    expect(listed.find((t) => t.id === id)?.result).toBeNull();
  });
});

describe('stop, pause and resume of a task the agent may not control', () => {
  it('answer one FORBIDDEN whatever its state, and stop --all by an agent leaves others’ runs alone without naming them', async () => {
    const h = harness();
    const { held: live, cancelled: done } = await othersTasks(h);
    const answers = new Set<string>();
    for (const id of [live, done]) {
      for (const state of ['stopped', 'paused', 'running'] as const) answers.add(await answer(h.runs.setControl({ target: [id], state, actor: agent('mallory') }), id));
    }
    // Before: INVALID_TRANSITION "task N is cancelled; there is no run to stop" for the finished one.
    expect([...answers]).toEqual(['FORBIDDEN: task N: only its creator or an operator may stop, pause or resume it (agent mallory may not)']);
    // Her stop --all stops what she may stop (nothing here), not a refusal naming another's live task.
    expect(await h.runs.setControl({ target: 'all', state: 'stopped', actor: agent('mallory') })).toEqual([]);
    expect(await h.runs.getControl(live)).toBe('running');
    expect(await h.runs.setControl({ target: 'all', state: 'stopped', actor: operator })).toEqual([live]);
  });
});

describe('a dependency on a task the agent may not read', () => {
  it('is one FORBIDDEN whatever that task’s state, and writes nothing; its own and claimable tasks it may still wait for', async () => {
    const h = harness();
    const { held, cancelled, completed } = await othersTasks(h);
    const before = (await h.tm.findTasks({})).length;
    const answers = new Set<string>();
    for (const dep of [held, cancelled, completed]) answers.add(await answer(h.tm.createTask({ title: 'watcher', dependsOn: [dep] }, agent('mallory')), dep));
    // Before: VALIDATION_FAILED "dependency N is cancelled" for one, a created task for the others
    // (whose claim then waited, or not, as the other task was open or completed).
    expect([...answers]).toEqual(['FORBIDDEN: dependency N is not yours to read: agent mallory did not create it, does not hold it and may not claim it']);
    expect((await h.tm.findTasks({})).length).toBe(before);
    const hers = (await h.tm.createTask({ title: 'mine' }, agent('mallory'))).task.id;
    const open = (await h.tm.createTask({ title: 'open to claims', card: loopCard() }, operator)).task.id;
    expect((await h.tm.createTask({ title: 'after both', dependsOn: [hers, open] }, agent('mallory'))).task.dependsOn).toEqual([hers, open]);
  });
});
