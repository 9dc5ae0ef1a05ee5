/**
 * MCP over Streamable HTTP against a real `taskloop serve` child process, driven by the SDK's
 * real Client and StreamableHTTPClientTransport, with two agent tokens and an operator's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, freshManager, waitFor } from '../helpers.js';
import { INITIALIZE, body, connectHttp, rawMcp } from './mcp-helpers.js';

const ALICE = 'alice-token-0123456789abcdef';
const BOB = 'bob-token-0123456789abcdef00';
const OP = 'operator-token-0123456789abc';
const TOKENS = JSON.stringify({ [ALICE]: { id: 'alice', role: 'agent' }, [BOB]: { id: 'bob', role: 'agent' }, [OP]: { id: 'operator', role: 'operator' } });

interface Serving {
  child: ChildProcess;
  url: string;
  port: number;
  lines: string[];
}

async function spawnServe(args: string[] = []): Promise<Serving> {
  const tm = freshManager();
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', tm.path, 'serve', '--port', '0', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: TOKENS },
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const lines: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter((l) => l !== '')));
  child.stdout!.resume();
  await waitFor(() => lines.find((l) => l.startsWith('board: ')), 20_000, `the board line\n${lines.join('\n')}`);
  const url = lines.find((l) => l.startsWith('listening on '))!.slice('listening on '.length);
  return { child, url, port: Number(new URL(url).port), lines };
}

const rpc = (id: number, method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method, params });

describe('MCP over Streamable HTTP on taskloop serve', () => {
  it('two agents: the token is the identity, each reads only its own tasks, and a session is worth nothing without its token', async () => {
    const served = await spawnServe();
    const alice = await connectHttp(served.url, ALICE);
    const bob = await connectHttp(served.url, BOB);
    expect((await alice.client.listTools()).tools.map((t) => t.name)).toEqual(['task_create', 'task_list', 'task_claim', 'task_transition', 'task_cancel', 'task_get', 'task_heartbeat']);

    // Alice's task, for her alone: its creator is the token's identity.
    const created = body(await alice.client.callTool({ name: 'task_create', arguments: { title: 'alice only', for_agent: 'alice' } }));
    expect(created).toMatchObject({ state: 'pending', creator: 'alice', created: true });
    const id = created.id as number;

    // Bob sees nothing of it, by listing or by id.
    const listed = body(await bob.client.callTool({ name: 'task_list', arguments: {} }));
    expect([...listed.pending, ...listed.assigned_to_you].map((t: { id: number }) => t.id)).not.toContain(id);
    const everyState = body(await bob.client.callTool({ name: 'task_list', arguments: { states: ['pending', 'claimed', 'cancelled'] } }));
    expect(everyState.tasks.map((t: { id: number }) => t.id)).not.toContain(id);
    const got = await bob.client.callTool({ name: 'task_get', arguments: { task_id: id } });
    expect(got.isError).toBe(true);
    expect(body(got).error.code).toBe('FORBIDDEN');
    expect(body(await alice.client.callTool({ name: 'task_get', arguments: { task_id: id } })).title).toBe('alice only');

    // Claiming to be Alice through the arguments is refused, not honoured; Bob may not cancel her task.
    for (const args of [{ task_id: id, as: 'alice' }, { task_id: id, agent: 'alice' }]) {
      const smuggled = await bob.client.callTool({ name: 'task_get', arguments: args });
      expect(body(smuggled).error.code, JSON.stringify(args)).toBe('VALIDATION_FAILED');
    }
    expect(body(await bob.client.callTool({ name: 'task_cancel', arguments: { task_id: id } })).error.code).toBe('FORBIDDEN');
    expect(body(await bob.client.callTool({ name: 'task_claim', arguments: { task_id: id } })).error.code).toBe('FORBIDDEN');
    expect(body(await alice.client.callTool({ name: 'task_get', arguments: { task_id: id } }))).toMatchObject({ state: 'pending', assignee: null });

    // Alice's session id with Bob's token is no session; with Alice's it is.
    const sid = alice.transport.sessionId!;
    expect(sid).toMatch(/^[0-9a-f-]{36}$/);
    const stolen = await rawMcp(served.url, 'POST', rpc(7, 'tools/call', { name: 'task_get', arguments: { task_id: id } }), { authorization: `Bearer ${BOB}`, 'mcp-session-id': sid });
    expect(stolen.status).toBe(404);
    expect(stolen.json.error.code).toBe(-32001);
    expect(JSON.stringify(stolen.json)).not.toContain('alice only');
    const own = await rawMcp(served.url, 'POST', rpc(8, 'tools/call', { name: 'task_get', arguments: { task_id: id } }), { authorization: `Bearer ${ALICE}`, 'mcp-session-id': sid });
    expect(own.status).toBe(200);
    expect(JSON.stringify(own.json)).toContain('alice only');
    // Nor can Bob end Alice's session.
    expect((await rawMcp(served.url, 'DELETE', undefined, { authorization: `Bearer ${BOB}`, 'mcp-session-id': sid })).status).toBe(404);
    expect(body(await alice.client.callTool({ name: 'task_get', arguments: { task_id: id } })).id).toBe(id);
  });

  it('refuses no token (401), an operator’s token (403), a foreign Origin or a rebinding Host (403), GET (405), a batch (-32600), and answers an unknown tool -32602', async () => {
    const served = await spawnServe();
    const none = await rawMcp(served.url, 'POST', INITIALIZE);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
    await expect(connectHttp(served.url, undefined)).rejects.toThrow(/401|UNAUTHORIZED/);
    await expect(connectHttp(served.url, 'not-a-token-0123456789')).rejects.toThrow(/401|UNAUTHORIZED/);

    const op = await rawMcp(served.url, 'POST', INITIALIZE, { authorization: `Bearer ${OP}` });
    expect(op.status).toBe(403);
    expect(op.json.error.code).toBe('FORBIDDEN');

    const foreign = await rawMcp(served.url, 'POST', INITIALIZE, { authorization: `Bearer ${ALICE}`, origin: 'http://evil.example' });
    expect(foreign.status).toBe(403);
    expect(foreign.json.error.code).toBe('ORIGIN_REFUSED');
    const rebound = await rawMcp(served.url, 'POST', INITIALIZE, { authorization: `Bearer ${ALICE}`, host: `evil.example:${served.port}` });
    expect(rebound.status).toBe(403);
    expect(rebound.json.error.code).toBe('ORIGIN_REFUSED');
    const sameOrigin = await rawMcp(served.url, 'POST', INITIALIZE, { authorization: `Bearer ${ALICE}`, origin: `http://127.0.0.1:${served.port}` });
    expect(sameOrigin.status).toBe(200);
    expect(sameOrigin.headers['mcp-session-id']).toBeDefined();

    // In that session: a task-augmented call (a capability the server does not declare) is
    // refused before the tool runs, and arguments nested past the limit never reach it.
    const session = { authorization: `Bearer ${ALICE}`, 'mcp-session-id': String(sameOrigin.headers['mcp-session-id']) };
    const augmented = await rawMcp(served.url, 'POST', rpc(5, 'tools/call', { name: 'task_create', arguments: { title: 'via a task' }, task: { ttl: 1000 } }), session);
    expect(augmented.json.error.code).toBeLessThan(0);
    const deep = await rawMcp(served.url, 'POST', `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"task_create","arguments":{"title":"deep","card":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}}}`, session);
    expect(deep.status).toBe(400);
    expect(deep.json.error).toMatchObject({ code: -32602 });
    expect(deep.json.error.message).toMatch(/params.arguments nests deeper than 64 levels/);
    const listed = await rawMcp(served.url, 'POST', rpc(7, 'tools/call', { name: 'task_list', arguments: { states: ['pending'] } }), session);
    expect(JSON.parse(listed.json.result.content[0].text).tasks).toEqual([]);

    const get = await rawMcp(served.url, 'GET', undefined, { authorization: `Bearer ${ALICE}`, accept: 'text/event-stream' });
    expect(get.status).toBe(405);
    const batch = await rawMcp(served.url, 'POST', [INITIALIZE], { authorization: `Bearer ${ALICE}` });
    expect(batch.status).toBe(400);
    expect(batch.json.error.code).toBe(-32600);
    const noSession = await rawMcp(served.url, 'POST', rpc(2, 'tools/list'), { authorization: `Bearer ${ALICE}` });
    expect(noSession.status).toBe(400);

    const alice = await connectHttp(served.url, ALICE);
    const unknown = await alice.client.callTool({ name: 'no_such_tool', arguments: {} }).then(() => null, (err: { code?: number; message: string }) => err);
    expect(unknown).toMatchObject({ code: -32602 });
    expect(unknown!.message).toContain('Unknown tool: no_such_tool');
    // A module's tool is served only when named (--mcp-tools); the built-in demo tools never are.
    const demo = await alice.client.callTool({ name: 'echo', arguments: { text: 'hi' } }).then(() => null, (err: { code?: number }) => err);
    expect(demo).toMatchObject({ code: -32602 });
  });

  it('serves --mcp-tools beside the task tools under task_enforcer, and strict schemas when the client asks (?schemas=strict)', async () => {
    const served = await spawnServe(['--mcp-tools', join(ROOT, 'test/fixtures/mcp-tools.mjs')]);
    const alice = await connectHttp(served.url, ALICE);
    const names = (await alice.client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['task_create', 'note_read', 'note_write']));
    expect(body(await alice.client.callTool({ name: 'note_read', arguments: {} }))).toMatchObject({ note: 'ship it', read_by: 'alice' });
    const early = await alice.client.callTool({ name: 'note_write', arguments: { text: 'x' } });
    expect(body(early).error).toMatchObject({ code: 'FORBIDDEN' });
    expect(body(early).error.message).toContain('holds no active task');
    const task = body(await alice.client.callTool({ name: 'task_create', arguments: { title: 'work', for_agent: 'alice' } }));
    expect(body(await alice.client.callTool({ name: 'task_claim', arguments: { task_id: task.id } })).claimed.state).toBe('claimed');
    expect(body(await alice.client.callTool({ name: 'note_write', arguments: { text: 'x' } }))).toEqual({ written: 'x', by: 'alice' });

    const strict = await connectHttp(served.url, BOB, '/mcp?schemas=strict');
    const create = (await strict.client.listTools()).tools.find((t) => t.name === 'task_create')!;
    const schema = create.inputSchema as unknown as { properties: Record<string, any>; required: string[]; additionalProperties: boolean };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required.sort()).toEqual(Object.keys(schema.properties).sort());
    expect(schema.properties.card.type).toEqual(['string', 'null']);
    // What a strict-mode model sends: null for what it leaves out, the card as a JSON string.
    const made = body(await strict.client.callTool({
      name: 'task_create',
      arguments: { title: 'strict', card: JSON.stringify({ goal: 'g', allowed_tools: [] }), priority: null, depends_on: null, idempotency_key: null, queue: null, for_agent: null, requires: null },
    }));
    expect(made).toMatchObject({ title: 'strict', creator: 'bob', created: true });
    expect((await alice.client.listTools()).tools.find((t) => t.name === 'task_create')!.inputSchema.properties!.card).toMatchObject({ type: 'object' });
    const bad = await rawMcp(served.url, 'POST', INITIALIZE, { authorization: `Bearer ${ALICE}` }, '/mcp?schemas=loose');
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('VALIDATION_FAILED');
  });

  it('refuses to start when --mcp-tools names a tool that may not be served over MCP', async () => {
    const tm = freshManager();
    const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', tm.path, 'serve', '--port', '0', '--mcp-tools', join(ROOT, 'test/fixtures/mcp-high-risk.mjs')], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: TOKENS },
    });
    onTestFinished(() => void (child.exitCode === null && child.kill('SIGKILL')));
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(stderr.trim()).toMatch(/^taskloop: tool wire_money is high-risk: its calls need an approval/);
    expect(stderr).not.toContain('listening on');
  });
});
