/**
 * Every surface on PostgreSQL, end to end, once each: the CLI, the HTTP API with SSE, MCP
 * over stdio with the SDK's real client, and the demo (daemon, board, approvals, tickets).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, freshManager, operator, tempDir } from '../helpers.js';
import { cliJson, spawnCli } from '../cli/helpers.js';
import { api, openStream, startServer } from '../monitor/http-helpers.js';

describe('the surfaces on PostgreSQL', () => {
  it('CLI: create, list, claim, move and read events; info names the store', async () => {
    const tm = freshManager();
    const db = tm.path;
    const created = { task: await cliJson<{ id: number }>(db, 'task', 'create', '--title', 'from the cli') };
    const listed = await cliJson<Array<{ id: number; state: string }>>(db, 'task', 'list');
    expect(listed.map((t) => [t.id, t.state])).toEqual([[created.task.id, 'pending']]);
    const claimed = await cliJson<{ id: number; claim_token: string }>(db, '--as', 'alice', 'task', 'claim');
    expect(claimed.id).toBe(created.task.id);
    await cliJson(db, '--as', 'alice', 'task', 'transition', String(created.task.id), 'in_progress', '--token', claimed.claim_token);
    const events = await spawnCli(['--db', db, '--json', 'events']);
    expect(events.code, events.stderr).toBe(0);
    expect(events.stdout.split('\n').map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(['task.created', 'task.claimed', 'task.transitioned']);
    const info = await cliJson<{ kind: string; capabilities: Record<string, boolean> }>(db, 'info');
    expect(info).toMatchObject({ kind: 'postgres', capabilities: { multiple_hosts: true, skip_locked: true } });
    expect((await tm.getTask(created.task.id)).state).toBe('in_progress');
  });

  it('HTTP and SSE: a task created over the API is streamed to a client resuming from Last-Event-ID', async () => {
    const tm = freshManager();
    const s = await startServer({ path: tm.path });
    const first = await api(s.op, 'POST', '/api/tasks', { title: 'one' });
    expect(first.status, JSON.stringify(first.json)).toBe(201);
    const cursor = (await tm.stats()).lastEventId;
    const stream = await openStream(`${s.url}/api/events`, { ...s.auth, 'last-event-id': String(cursor) });
    onTestFinished(() => stream.close());
    await api(s.op, 'POST', '/api/tasks', { title: 'two' });
    const created = (e: { data: any }) => e.data?.type === 'task.created';
    const event = await stream.next(created, 'the second task.created');
    expect(Number(event.id)).toBeGreaterThan(cursor);
    expect(JSON.stringify(event.data)).toContain('"two"');
    expect(stream.events.filter(created)).toHaveLength(1); // not the one before the cursor
  });

  it('MCP over stdio: the SDK client creates and lists tasks as its agent', async () => {
    const tm = freshManager();
    const client = new Client({ name: 'pg-test', version: '1.0.0' });
    const transport = new StdioClientTransport({ command: process.execPath, args: [join(ROOT, 'bin/taskloop'), '--db', tm.path, 'mcp', '--agent', 'claude'], stderr: 'ignore' });
    await client.connect(transport);
    onTestFinished(() => client.close());
    const made = await client.callTool({ name: 'task_create', arguments: { title: 'over mcp' } });
    expect(made.isError ?? false).toBe(false);
    const listed = await client.callTool({ name: 'task_list', arguments: {} });
    expect(JSON.stringify(listed.content)).toContain('over mcp');
    const [task] = await tm.findTasks({});
    expect(task).toMatchObject({ title: 'over mcp', creator: 'claude', creatorRole: 'agent' });
    await tm.cancelTask({ taskId: task!.id, actor: operator });
  });

  it('the demo runs its ticket paths and dependency graph to their ends on a server, and leaves no password in a file name or its log', async () => {
    const tm = freshManager();
    const cwd = tempDir();
    const env = { OPENAI_API_KEY: '', TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' };
    const r = await spawnCli(['--db', tm.path, '--json', 'demo', '--port', '0'], { env, cwd });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { tasks: Array<{ state: string; phase: string }>; pending_approvals: number[] };
    expect(out.tasks.map((t) => [t.state, t.phase])).toEqual([
      ['completed', 'completed'],
      ['waiting', 'waiting_approval'],
      ['completed', 'degraded'],
      ['completed', 'completed'],
      ['completed', 'completed'],
      ['completed', 'completed'],
    ]);
    expect(out.pending_approvals).toHaveLength(1);
    // The board's token file is named by a hash, under data/ of the working directory.
    const files = readdirSync(join(cwd, 'data'));
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^postgres-[0-9a-f]{16}\.http-token$/);
    expect(existsSync(join(cwd, 'postgres:'))).toBe(false);
    // Its log names the database (and the daemon's start line too) without the password:
    // logs end up in journals and files others read.
    const { password } = new URL(tm.path);
    expect(password.length).toBeGreaterThan(0);
    expect(r.stderr).toMatch(/database postgres:\/\/…@/);
    expect(r.stderr).toMatch(/daemon .* started: .*database postgres:\/\/…@/);
    expect(r.stderr).not.toContain(`:${password}@`);
  });
});
