/**
 * A priority is a power over everyone else's work: claims take the highest first, so an
 * agent that could create its tasks at 1,000,000 (the range's top, which the engine
 * accepted from anyone) put them ahead of every operator's task in every daemon's queue,
 * and with enough of them held every seat. An agent's task now ranks at most 0, the default
 * (authority.ts AGENT_MAX_PRIORITY); an agent orders its own work below that, and an
 * operator's urgent task (priority 1 or more) runs before any agent's.
 *
 * Attacked through each way an agent creates a task: the TaskManager (both stores), one bad
 * item in a batch, a real MCP client, and a run of an agent's card calling task_create (a
 * run acts for its card's author, so an operator's card keeps the whole range).
 */
import { describe, expect, it } from 'vitest';
import { AGENT_MAX_PRIORITY, type Actor } from '../../src/engine/index.js';
import { taskTools } from '../../src/tools/task-tools.js';
import { createToolRegistry } from '../../src/tools/registry.js';
import { agent, freshManager, operator } from '../helpers.js';
import { taskToolsClient } from '../tools/mcp-client.js';
import { card, drive, harness, loopContext } from '../workers/harness.js';

const refusal = (p: Promise<unknown>) => p.then(() => null, (e: { code?: string; message?: string }) => e);

describe('an agent’s task may not outrank an operator’s', () => {
  it('the TaskManager refuses an agent’s priority above 0 with FORBIDDEN in one line, and writes nothing', async () => {
    const tm = freshManager();
    expect(AGENT_MAX_PRIORITY).toBe(0);
    for (const priority of [1, 7, 1_000_000]) {
      const err = await refusal(tm.createTask({ title: 'me first', priority }, agent('mallory')));
      expect(err, `priority ${priority}`).toMatchObject({ code: 'FORBIDDEN' });
      expect(err!.message).toMatch(new RegExp(`^priority ${priority}: an agent's task may rank at most 0`));
      expect(err!.message).not.toContain('\n');
    }
    // One such item refuses its whole batch, idempotency key or not.
    const batch = await refusal(
      tm.createTasks([{ title: 'innocent' }, { title: 'me first', priority: 2, idempotencyKey: 'k' }, { title: 'also innocent' }], agent('mallory')),
    );
    expect(batch).toMatchObject({ code: 'FORBIDDEN' });
    expect((await tm.stats()).lastEventId).toBe(0);
    expect(await tm.findTasks({})).toEqual([]);
  });

  it('an agent orders its own work at 0 and below; people and the system use the whole range', async () => {
    const tm = freshManager();
    const mine = await tm.createTasks([{ title: 'default' }, { title: 'zero', priority: 0 }, { title: 'later', priority: -3 }, { title: 'last', priority: -1_000_000 }], agent('alice'));
    expect(mine.map((r) => r.task.priority)).toEqual([0, 0, -3, -1_000_000]);
    const people: Actor[] = [operator, { id: 'rita', role: 'reviewer' }, { id: 'cron', role: 'system' }];
    for (const who of people) {
      expect((await tm.createTask({ title: `${who.role}'s`, priority: 1_000_000 }, who)).task.priority, who.role).toBe(1_000_000);
    }
  });

  it('an operator’s urgent task is claimed before every agent task, however many came first', async () => {
    const tm = freshManager();
    await tm.createTasks(Array.from({ length: 50 }, (_, i) => ({ title: `flood ${i}`, priority: AGENT_MAX_PRIORITY })), agent('mallory'));
    const urgent = (await tm.createTask({ title: 'urgent', priority: 1 }, operator)).task;
    expect((await tm.claimTask({ agent: 'worker' }))!.id).toBe(urgent.id);
  });

  it('over MCP: task_create with a priority above 0 is refused to the agent, and nothing is created', async () => {
    const tm = freshManager();
    const client = await taskToolsClient(tm, 'mallory');
    type Text = { content: Array<{ text: string }>; isError?: boolean };
    const out = (await client.callTool({ name: 'task_create', arguments: { title: 'me first', priority: 1_000_000 } })) as Text;
    expect(out.isError).toBe(true);
    expect(JSON.parse(out.content[0]!.text).error).toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/^priority 1000000: /) });
    expect(await tm.findTasks({})).toEqual([]);
    const ok = JSON.parse(((await client.callTool({ name: 'task_create', arguments: { title: 'after the others', priority: -1 } })) as Text).content[0]!.text);
    expect(ok).toMatchObject({ title: 'after the others', priority: -1, creator: 'mallory' });
  });

  it('in a run the model’s task_create is an agent’s, whoever wrote the card: refused above 0, accepted below', async () => {
    // An agent's card acts as its author; an operator's or a reviewer's as the runner
    // (loop-calls.ts): either way the arguments are the model's, and a model is an agent.
    const h = harness();
    h.tools = createToolRegistry([...taskTools]);
    const script = [
      { action: 'tool', tool: 'task_create', args: { title: 'spawned first', priority: 5 } },
      { action: 'tool', tool: 'task_create', args: { title: 'spawned after', priority: -1 } },
      { action: 'done' },
    ];
    const c = card({ allowed_tools: ['task_create'], script, budget: { max_steps: 5, max_failures: 2 } });
    for (const author of [agent('mallory'), operator, { id: 'rita', role: 'reviewer' } as const]) {
      const parent = (await h.tm.createTask({ title: `${author.role}'s card`, card: c }, author)).task;
      const claim = (await h.tm.claimTask({ agent: 'worker', taskId: parent.id, start: true }))!;
      const { result, events } = await drive(loopContext(h, claim));
      expect(result.phase, author.role).toBe('completed');
      const failed = events.flatMap((e) => (e.type === 'step_finished' && e.step.status === 'failed' ? [e.step.error] : []));
      expect(failed, author.role).toEqual([expect.stringMatching(/FORBIDDEN: priority 5: an agent's task may rank at most 0/)]);
      const spawned = (await h.tm.findTasks({})).filter((t) => t.title.startsWith('spawned') && t.creator === (author.role === 'agent' ? author.id : 'worker') && t.id > parent.id);
      expect(spawned.map((t) => [t.title, t.priority]), author.role).toEqual([['spawned after', -1]]);
    }
  });
});
