/**
 * `taskloop mcp` over real stdio, line by line: raw lines written to the child's stdin, raw
 * lines read from its stdout. Every line gets its answer, and the server goes on serving.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { describe, expect, it, onTestFinished } from 'vitest';
import { MAX_MESSAGE_BYTES } from '../../src/tools/mcp-transport.js';
import { ROOT, freshManager } from '../helpers.js';

interface Reply {
  jsonrpc: string;
  id: string | number | null;
  result?: Record<string, unknown>;
  error?: { code: number; message: string };
}

interface RawServer {
  child: ChildProcessWithoutNullStreams;
  /** Writes `line` and its newline. */
  send(line: string): void;
  /** The next line the server writes, parsed. */
  next(what: string): Promise<Reply>;
  /** Stops reading stdout here (so that another reader may take over). */
  detach(): void;
  exited: Promise<number | null>;
}

function startRaw(db: string): RawServer {
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', db, 'mcp', '--agent', 'claude']);
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill();
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  const decoder = new StringDecoder('utf8');
  const lines: string[] = [];
  let buffer = '';
  let wake: (() => void) | undefined;
  const onData = (chunk: Buffer) => {
    buffer += decoder.write(chunk);
    for (let cut = buffer.indexOf('\n'); cut >= 0; cut = buffer.indexOf('\n')) {
      lines.push(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 1);
    }
    wake?.();
  };
  child.stdout.on('data', onData);
  return {
    child,
    exited,
    send: (line) => void child.stdin.write(`${line}\n`),
    async next(what) {
      const deadline = Date.now() + 15_000;
      while (lines.length === 0) {
        if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}) before answering ${what}; stderr: ${stderr}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no answer to ${what}; stderr: ${stderr}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      return JSON.parse(lines.shift()!) as Reply;
    },
    detach: () => void child.stdout.off('data', onData),
  };
}

const call = (id: number, name: string, args: string) => `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`;

/** An error on one line, without a stack or a dump. */
function expectOneLine(reply: Reply, what: string): void {
  expect(reply.error, what).toBeDefined();
  expect(reply.error!.message, what).not.toMatch(/[\r\n]|\bat .*:\d+|node_modules|\.ts:\d+/);
}

describe('taskloop mcp on stdio answers every line', () => {
  it('answers malformed JSON -32700, what is not a JSON-RPC 2.0 request -32600, an unknown method -32601 and wrong-typed params -32602', async () => {
    const tm = freshManager();
    const server = startRaw(tm.path);
    const cases: Array<[string, number, string | number | null, RegExp]> = [
      ['{not json', -32700, null, /^Parse error: not valid JSON/],
      ['{"jsonrpc":"2.0","id":1,"method":"tools/list"', -32700, null, /^Parse error: /],
      ['{"jsonrpc":"1.0","id":2,"method":"tools/list"}', -32600, 2, /^Invalid Request: jsonrpc must be "2.0"$/],
      ['{"id":3,"method":"tools/list"}', -32600, 3, /jsonrpc must be "2.0"/],
      ['{"jsonrpc":"2.0","id":{"n":4},"method":"tools/list"}', -32600, null, /^Invalid Request: id must be a string or an integer$/],
      ['{"jsonrpc":"2.0","id":[5],"method":"tools/list"}', -32600, null, /id must be/],
      ['{"jsonrpc":"2.0","id":true,"method":"tools/list"}', -32600, null, /id must be/],
      ['{"jsonrpc":"2.0","id":null,"method":"tools/list"}', -32600, null, /id must be/],
      ['{"jsonrpc":"2.0","id":6.5,"method":"tools/list"}', -32600, null, /id must be/],
      ['[{"jsonrpc":"2.0","id":7,"method":"tools/list"}]', -32600, null, /^Invalid Request: a batch \(a JSON array\) is not accepted/],
      ['[]', -32600, null, /batch/],
      ['"tools/list"', -32600, null, /^Invalid Request: a message must be a JSON object$/],
      ['{"jsonrpc":"2.0","id":8}', -32600, 8, /^Invalid Request: no method/],
      ['{"jsonrpc":"2.0","id":9,"method":42}', -32600, 9, /^Invalid Request: method must be a string$/],
      ['{"jsonrpc":"2.0","method":42}', -32600, null, /method must be a string/],
      ['{"jsonrpc":"2.0","id":10,"method":"tools/list","extra":1}', -32600, 10, /^Invalid Request: unknown member 'extra'$/],
      ['{"jsonrpc":"2.0","id":11,"method":"tools/list","result":{}}', -32600, 11, /not both/],
      ['{"jsonrpc":"2.0","id":12,"method":"tools/list","params":7}', -32600, 12, /params must be an object/],
      ['{"jsonrpc":"2.0","id":"thirteen","method":"resources/list"}', -32601, 'thirteen', /^Method not found$/],
      [call(14, 'task_create', '"x"'), -32602, 14, /^Invalid params: tools\/call: params\.arguments: .*expected record, received string$/],
      [call(15, 'task_create', '[{"title":"t"}]'), -32602, 15, /^Invalid params: tools\/call: params\.arguments: .*received array$/],
      ['{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"arguments":{}}}', -32602, 16, /^Invalid params: tools\/call: params\.name: /],
      ['{"jsonrpc":"2.0","id":17,"method":"tools/call","params":[1]}', -32602, 17, /params must be an object/],
      ['{"jsonrpc":"2.0","id":18,"method":"initialize","params":{"protocolVersion":5}}', -32602, 18, /^Invalid params: initialize: params\.protocolVersion: /],
    ];
    for (const [line, code, id, message] of cases) {
      server.send(line);
      const reply = await server.next(line);
      expect(reply, line).toMatchObject({ jsonrpc: '2.0', id, error: { code } });
      expect(reply.error!.message, line).toMatch(message);
      expectOneLine(reply, line);
    }
    // A valid notification gets no answer; the next request does.
    server.send('{"jsonrpc":"2.0","method":"notifications/initialized"}');
    server.send('{"jsonrpc":"2.0","id":19,"method":"tools/list"}');
    expect(await server.next('tools/list')).toMatchObject({ id: 19, result: { tools: expect.any(Array) } });
    expect((await tm.stats()).lastEventId).toBe(0);
  });

  it('refuses tools/call arguments nested 5,000 levels with -32602 naming the depth limit, writes nothing, and answers a request sent just before its input ends', async () => {
    const tm = freshManager();
    const server = startRaw(tm.path);
    const deep = `{"title":"t","card":{"goal":"g","x":${'['.repeat(5000)}${']'.repeat(5000)}}}`;
    server.send(call(1, 'task_create', deep));
    const reply = await server.next('deep arguments');
    expect(reply).toEqual({
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32602, message: 'Invalid params: tools/call: params.arguments nests deeper than 64 levels (JSON input may nest at most 64)' },
    });
    expect((await tm.stats()).lastEventId).toBe(0);

    server.send(call(2, 'task_create', '{"title":"shallow","card":{"goal":"g"}}'));
    server.child.stdin.end();
    const created = await server.next('task_create');
    expect(created).toMatchObject({ id: 2, result: { structuredContent: { title: 'shallow', creator: 'claude' } } });
    expect(await server.exited).toBe(0);
    expect((await tm.findTasks()).map((t) => t.title)).toEqual(['shallow']);
  });

  it('refuses a 5 MB line with -32600 once it passes 4 MiB, before it ends, then serves the next line and the real SDK client', async () => {
    const tm = freshManager();
    const server = startRaw(tm.path);
    server.child.stdin.write(`{"jsonrpc":"2.0","id":1,"method":"tools/call","x":"${'x'.repeat(MAX_MESSAGE_BYTES)}`);
    const refused = await server.next('the oversized line');
    expect(refused).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600 } });
    expect(refused.error!.message).toBe(`Invalid Request: a message may be at most ${MAX_MESSAGE_BYTES} bytes (one line); this line was longer and is skipped`);
    server.send(`${'garbage '.repeat(128 * 1024)}"}`); // the rest of that line: 1 MB more, skipped
    server.send('{"jsonrpc":"2.0","id":2,"method":"tools/list"}');
    expect(await server.next('tools/list after the oversized line')).toMatchObject({ id: 2, result: { tools: expect.any(Array) } });

    server.send('x'.repeat(5 * 1024 * 1024)); // 5 MB of garbage in one write
    expect(await server.next('5 MB of garbage')).toMatchObject({ id: null, error: { code: -32600 } });
    server.send('{"jsonrpc":"2.0","id":3,"method":"tools/list"}');
    expect(await server.next('tools/list after the garbage')).toMatchObject({ id: 3, result: { tools: expect.any(Array) } });

    // The same process, now through the SDK's own client: the SDK's line transport over the child's pipes.
    server.detach();
    const client = new Client({ name: 'taskloop-test', version: '1.0.0' });
    await client.connect(new StdioServerTransport(server.child.stdout, server.child.stdin));
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain('task_create');
    const created = (await client.callTool({ name: 'task_create', arguments: { title: 'after the garbage' } })) as { structuredContent: Record<string, unknown> };
    expect(created.structuredContent).toMatchObject({ title: 'after the garbage', creator: 'claude', state: 'pending' });
    await client.close();
    server.child.stdin.end();
    expect(await server.exited).toBe(0);
  });
});
