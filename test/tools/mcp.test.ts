import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawnCli } from '../cli/helpers.js';
import { ROOT, agent, freshManager } from '../helpers.js';
import { taskToolsClient } from './mcp-client.js';

type Text = { content: Array<{ type: string; text: string }>; isError?: boolean };
const body = (r: unknown) => JSON.parse((r as Text).content[0]!.text) as Record<string, unknown>;

async function connect(db: string, agent: string): Promise<Client> {
  const client = new Client({ name: 'taskloop-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: process.execPath, args: [join(ROOT, 'bin/taskloop'), '--db', db, 'mcp', '--agent', agent], stderr: 'pipe' });
  await client.connect(transport);
  onTestFinished(() => client.close());
  return client;
}

describe('taskloop mcp', () => {
  it('a real MCP client drives a task from create to review, acting as the server’s agent', async () => {
    const tm = freshManager();
    const client = await connect(tm.path, 'mcp-bot');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(['task_create', 'task_list', 'task_claim', 'task_transition', 'task_cancel', 'task_get', 'task_heartbeat']);
    expect(tools.find((t) => t.name === 'task_transition')!.inputSchema).toMatchObject({ type: 'object', required: ['task_id', 'to'] });

    const created = body(await client.callTool({ name: 'task_create', arguments: { title: 'write the summary', card: { goal: 'summary' } } }));
    expect(created).toMatchObject({ state: 'pending', creator: 'mcp-bot', created: true });
    const claimed = body(await client.callTool({ name: 'task_claim', arguments: { task_id: created.id } })).claimed as Record<string, unknown>;
    expect(claimed).toMatchObject({ state: 'claimed', assignee: 'mcp-bot' });
    for (const to of ['in_progress', 'review']) {
      const moved = body(await client.callTool({ name: 'task_transition', arguments: { task_id: created.id, to, claim_token: claimed.claim_token } }));
      expect(moved.state).toBe(to);
    }
    // An identity smuggled into the arguments is refused, not honoured.
    const smuggled = (await client.callTool({ name: 'task_transition', arguments: { task_id: created.id, to: 'completed', agent: 'operator' } })) as Text;
    expect(smuggled.isError).toBe(true);
    expect(body(smuggled).error).toMatchObject({ code: 'VALIDATION_FAILED' });
    // The assignee cannot pass its own review.
    const self = (await client.callTool({ name: 'task_transition', arguments: { task_id: created.id, to: 'completed' } })) as Text;
    expect(body(self).error).toMatchObject({ code: 'FORBIDDEN' });
    const task = await tm.getTask(created.id as number);
    expect(task).toMatchObject({ state: 'review', creator: 'mcp-bot', creatorRole: 'agent', assignee: 'mcp-bot' });
  });

  it('another agent’s server may not cancel a task it did not create', async () => {
    const tm = freshManager();
    const alice = await connect(tm.path, 'alice');
    const mallory = await connect(tm.path, 'mallory');
    const created = body(await alice.callTool({ name: 'task_create', arguments: { title: 'mine' } }));
    const refused = (await mallory.callTool({ name: 'task_cancel', arguments: { task_id: created.id } })) as Text;
    expect(body(refused).error).toMatchObject({ code: 'FORBIDDEN' });
    expect(body(await alice.callTool({ name: 'task_cancel', arguments: { task_id: created.id } })).state).toBe('cancelled');
  });

  it('refuses to serve as the operator or a system actor: taskloop mcp --agent operator exits with RESERVED_NAME', async () => {
    const tm = freshManager();
    for (const name of ['operator', 'Operator', 'sweeper', 'acceptance']) {
      const r = await spawnCli(['--db', tm.path, 'mcp', '--agent', name]);
      expect(r.code, name).toBe(1);
      expect(r.stderr).toMatch(/^taskloop: RESERVED_NAME: --agent: /);
    }
  });

  it('an agent’s card that would start a program is refused at creation, over MCP, and nothing is written', async () => {
    const tm = freshManager();
    const client = await connect(tm.path, 'mallory');
    for (const card of [
      { goal: 'g', allowed_tools: ['launch_app'], launch_allowlist: [['sh', '-c', 'touch /tmp/pwned']] },
      { goal: 'g', acceptance: { checks: [{ id: 'x', command: ['sh', '-c', 'touch /tmp/pwned'] }] } },
    ]) {
      const refused = (await client.callTool({ name: 'task_create', arguments: { title: 'innocent', card } })) as Text;
      expect(refused.isError).toBe(true);
      expect(body(refused).error).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect((await tm.stats()).lastEventId).toBe(0);
  });

  it('an agent reads only what it created, holds or may claim', async () => {
    const tm = freshManager();
    const alice = await connect(tm.path, 'alice');
    const mallory = await connect(tm.path, 'mallory');
    const reserved = body(await alice.callTool({ name: 'task_create', arguments: { title: 'for alice only', for_agent: 'alice', card: { goal: 'secret plan' } } }));
    const held = body(await alice.callTool({ name: 'task_create', arguments: { title: 'alice holds it' } }));
    await alice.callTool({ name: 'task_claim', arguments: { task_id: held.id } });
    const open = body(await alice.callTool({ name: 'task_create', arguments: { title: 'anyone may claim' } }));
    const { task: operators } = await tm.createTask({ title: 'the operator’s, claimed', forAgent: 'worker' }, { id: 'operator', role: 'operator' });
    await tm.claimTask({ agent: 'worker', taskId: operators.id });

    for (const id of [reserved.id, held.id]) {
      const refused = (await mallory.callTool({ name: 'task_get', arguments: { task_id: id } })) as Text;
      expect(body(refused).error, `task ${String(id)}`).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect(body(await mallory.callTool({ name: 'task_get', arguments: { task_id: open.id } }))).toMatchObject({ title: 'anyone may claim' });
    const listed = body(await mallory.callTool({ name: 'task_list', arguments: { states: ['pending', 'claimed', 'in_progress'] } })).tasks as Array<{ id: number }>;
    expect(listed.map((t) => t.id)).toEqual([open.id]);
    const aliceSees = body(await alice.callTool({ name: 'task_list', arguments: { states: ['pending', 'claimed'] } })).tasks as Array<{ id: number }>;
    expect(aliceSees.map((t) => t.id)).toEqual([reserved.id, held.id, open.id]);
  });

  it('task_list shows each task without its card and result, so a page of big cards is neither read nor over the output cap; task_get reads one whole', async () => {
    const tm = freshManager();
    const client = await taskToolsClient(tm, 'hoarder');
    const big = { goal: 'x'.repeat(10_000) };
    await tm.createTasks(Array.from({ length: 30 }, (_, i) => ({ title: `big ${i}`, card: big })), agent('hoarder'));
    const out = (await client.callTool({ name: 'task_list', arguments: { states: ['pending'], limit: 30 } })) as Text;
    expect(out.isError, out.content[0]!.text.slice(0, 200)).not.toBe(true);
    const tasks = body(out).tasks as Array<Record<string, unknown>>;
    expect(tasks).toHaveLength(30);
    expect(tasks[0]).toMatchObject({ title: 'big 0', state: 'pending', creator: 'hoarder' });
    expect(tasks.filter((t) => 'card' in t || 'result' in t)).toEqual([]);
    expect(body(await client.callTool({ name: 'task_get', arguments: { task_id: tasks[0]!.id } })).card).toEqual(big);
    // The store's listing leaves them unread.
    expect(await tm.findTasks({ states: ['pending'], limit: 1, summary: true })).toMatchObject([{ title: 'big 0', card: {}, result: null }]);
  });

  it('an internal failure reaches the model as TOOL_FAILED without its own text; the text goes to the server’s log', async () => {
    const tm = freshManager();
    const logged: string[] = [];
    const client = await taskToolsClient(tm, 'claude', (l) => logged.push(l));
    await tm.close(); // every query now fails inside better-sqlite3
    const failed = (await client.callTool({ name: 'task_list', arguments: {} })) as Text;
    expect(failed.isError).toBe(true);
    expect(body(failed).error).toEqual({ code: 'TOOL_FAILED', message: "task_list failed inside the server; its operator can read why in the server's log" });
    expect(logged.join('\n')).toMatch(/task_list failed: .*(database|connection)/i);
    expect(agent('claude').role).toBe('agent');
  });
});
