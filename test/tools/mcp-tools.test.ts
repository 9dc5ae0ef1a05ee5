/**
 * What an MCP server hands an agent beside the task tools (`taskloop mcp --tools`), the
 * unknown-tool protocol error, and `--strict`, over real stdio with the SDK's real client.
 */
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { mcpTools, whyNotServable } from '../../src/tools/mcp-tools.js';
import { desktopTools } from '../../src/tools/desktop/tools.js';
import { basicTools } from '../../src/tools/basic.js';
import { ticketTools } from '../../src/tools/tickets.js';
import { taskTools } from '../../src/tools/task-tools.js';
import { spawnCli } from '../cli/helpers.js';
import { ROOT, freshManager } from '../helpers.js';
import { body } from '../monitor/mcp-helpers.js';

const fixture = (name: string) => join(ROOT, 'test/fixtures', name);

async function connect(db: string, ...args: string[]): Promise<Client> {
  const client = new Client({ name: 'taskloop-test', version: '1.0.0' });
  const transport = new StdioClientTransport({ command: process.execPath, args: [join(ROOT, 'bin/taskloop'), '--db', db, 'mcp', '--agent', 'alice', ...args], stderr: 'pipe' });
  await client.connect(transport);
  onTestFinished(() => client.close());
  return client;
}

describe('the tools an MCP server may serve', () => {
  it('refuses high-risk tools, tools that write a scoped target, tools that need a card and operator-only tools (the desktop’s); serves the rest beside the task tools', () => {
    expect(whyNotServable(ticketTools.find((t) => t.name === 'notify_oncall')!)).toMatch(/high-risk/);
    expect(whyNotServable(ticketTools.find((t) => t.name === 'update_ticket_priority')!)).toMatch(/scope\.write_ticket_ids/);
    expect(whyNotServable(desktopTools.find((t) => t.name === 'launch_app')!)).toMatch(/launch_allowlist/);
    for (const name of ['type_text', 'press_keys', 'click', 'screen_snapshot']) {
      expect(whyNotServable(desktopTools.find((t) => t.name === name)!)).toMatch(new RegExp(`^tool ${name} is operator-only`));
    }
    expect(whyNotServable(ticketTools.find((t) => t.name === 'get_ticket')!)).toBeNull();
    expect(mcpTools(basicTools).map((t) => t.name)).toEqual([...taskTools.map((t) => t.name), 'noop', 'echo', 'wait']);
    expect(() => mcpTools(ticketTools)).toThrow(/update_ticket_priority/);
    expect(() => mcpTools([taskTools[0]!])).toThrow(/task_create is registered twice/);
  });
});

describe('taskloop mcp --tools and --strict', () => {
  it('serves a module’s tools beside the task tools; a write tool waits for a claimed task (task_enforcer); an unknown tool is -32602', async () => {
    const tm = freshManager();
    const client = await connect(tm.path, '--tools', fixture('mcp-tools.mjs'));
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual([...taskTools.map((t) => t.name), 'note_read', 'note_write']);
    expect(body(await client.callTool({ name: 'note_read', arguments: { day: 'monday' } }))).toEqual({ day: 'monday', note: 'ship it', read_by: 'alice' });
    expect(body(await client.callTool({ name: 'note_read', arguments: { day: 'monday', as: 'bob' } })).error.code).toBe('VALIDATION_FAILED');
    const early = await client.callTool({ name: 'note_write', arguments: { text: 'x' } });
    expect(early.isError).toBe(true);
    expect(body(early).error.message).toMatch(/alice holds no active task/);
    const task = body(await client.callTool({ name: 'task_create', arguments: { title: 't' } }));
    await client.callTool({ name: 'task_claim', arguments: { task_id: task.id } });
    expect(body(await client.callTool({ name: 'note_write', arguments: { text: 'x' } }))).toEqual({ written: 'x', by: 'alice' });

    for (const name of ['no_such_tool', 'kv_set', 'notify_oncall']) {
      const err = await client.callTool({ name, arguments: {} }).then(() => null, (e: { code?: number; message: string }) => e);
      expect(err, name).toMatchObject({ code: -32602 });
      expect(err!.message).toContain(`Unknown tool: ${name}`);
    }
  });

  it('refuses to start (exit 2, one line) on a tool that may not be served, and on --strict with a tool strict mode cannot express', async () => {
    const tm = freshManager();
    const scoped = await spawnCli(['--db', tm.path, 'mcp', '--agent', 'alice', '--tools', fixture('test-tools.mjs')]);
    expect(scoped.code).toBe(2);
    expect(scoped.stderr).toMatch(/^taskloop: tool kv_set writes a target \(key\) that a card's scope\.keys must list/);
    const risky = await spawnCli(['--db', tm.path, 'mcp', '--agent', 'alice', '--tools', fixture('mcp-high-risk.mjs')]);
    expect(risky.code).toBe(2);
    expect(risky.stderr).toMatch(/wire_money is high-risk/);
    expect(risky.stderr.split('\n')).toHaveLength(1);
    const untyped = await spawnCli(['--db', tm.path, 'mcp', '--agent', 'alice', '--strict', '--tools', fixture('mcp-untyped.mjs')]);
    expect(untyped.code).toBe(2);
    expect(untyped.stderr).toMatch(/strict schemas cannot be served: stash\.value: an argument of any type/);
    const missing = await spawnCli(['--db', tm.path, 'mcp', '--agent', 'alice', '--tools', fixture('no-such-module.mjs')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/tool module .*no-such-module\.mjs failed to load/);
  });

  it('--strict lists strict-mode schemas, and a call in that form (nulls, the card as JSON text) is taken', async () => {
    const tm = freshManager();
    const client = await connect(tm.path, '--strict', '--tools', fixture('mcp-tools.mjs'));
    for (const tool of (await client.listTools()).tools) {
      const schema = tool.inputSchema as { properties?: Record<string, unknown>; required?: string[]; additionalProperties?: boolean };
      expect(schema.additionalProperties, tool.name).toBe(false);
      expect([...(schema.required ?? [])].sort(), tool.name).toEqual(Object.keys(schema.properties ?? {}).sort());
      expect(JSON.stringify(schema), tool.name).not.toContain('"default"');
    }
    const made = body(await client.callTool({
      name: 'task_create',
      arguments: { title: 'strict', card: '{"goal":"g","allowed_tools":[]}', priority: null, depends_on: null, idempotency_key: null, queue: null, for_agent: null, requires: null },
    }));
    expect(made).toMatchObject({ title: 'strict', creator: 'alice', created: true });
    expect((await tm.getTask(made.id as number)).card).toMatchObject({ goal: 'g' });
    expect(body(await client.callTool({ name: 'note_read', arguments: { day: null } })).day).toBe('today');
  });
});
