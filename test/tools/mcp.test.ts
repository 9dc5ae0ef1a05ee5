import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, freshManager } from '../helpers.js';

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
});
