/** The stdio transport on real streams (PassThrough pairs), without a process around it. */
import { PassThrough } from 'node:stream';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { createStdioTransport } from '../../src/tools/mcp-transport.js';
import { waitFor } from '../helpers.js';

function harness(maxMessageBytes?: number) {
  const input = new PassThrough();
  const output = new PassThrough();
  const logged: string[] = [];
  const received: JSONRPCMessage[] = [];
  const written: string[] = [];
  let buffer = '';
  output.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    for (let cut = buffer.indexOf('\n'); cut >= 0; cut = buffer.indexOf('\n')) {
      written.push(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 1);
    }
  });
  const transport = createStdioTransport({ input, output, log: (l) => logged.push(l), ...(maxMessageBytes === undefined ? {} : { maxMessageBytes }) });
  transport.onmessage = (m) => void received.push(m);
  let closed = false;
  transport.onclose = () => void (closed = true);
  return { input, output, transport, logged, received, written, isClosed: () => closed };
}

describe('the MCP stdio transport', () => {
  it('reads one message per line, across chunks and with CRLF; a blank line is no message', async () => {
    const h = harness();
    await h.transport.start();
    h.input.write('{"jsonrpc":"2.0","id":1,"met');
    h.input.write('hod":"ping"}\r\n\n   \n{"jsonrpc":"2.0","method":"notifications/initialized"}\n');
    await waitFor(() => h.received.length === 2, 5000, 'two messages');
    expect(h.received).toEqual([{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/initialized' }]);
    expect(h.logged).toEqual([]); // every refusal is logged as it is written: none was
  });

  it('counts the cap in bytes: a line of exactly the cap is read, one byte more is refused, and the line after is read', async () => {
    const h = harness(64);
    await h.transport.start();
    const head = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"';
    const exact = `${head}${'y'.repeat(64 - head.length - 3)}"}}`;
    expect(Buffer.byteLength(exact)).toBe(64);
    h.input.write(`${exact}\n`);
    h.input.write(`${exact} \n{"jsonrpc":"2.0","id":2,"method":"ping"}\n`);
    await waitFor(() => h.received.length === 2 && h.written.length === 1, 5000, 'two messages and a refusal');
    expect(h.received.map((m) => (m as { id: number }).id)).toEqual([1, 2]);
    expect(h.written.map((l) => JSON.parse(l))).toEqual([{ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringMatching(/at most 64 bytes/) } }]);
  });

  it('sends an error with a multi-line message (a dump, a stack) on one line and logs the full text', async () => {
    const h = harness();
    await h.transport.start();
    const dump = '[\n  {\n    "code": "invalid_type",\n    "path": ["params"]\n  }\n]';
    await h.transport.send({ jsonrpc: '2.0', id: 7, error: { code: -32603, message: dump } });
    await waitFor(() => h.written.length === 1, 5000, 'the error line');
    expect(h.written.map((l) => JSON.parse(l))).toEqual([{ jsonrpc: '2.0', id: 7, error: { code: -32603, message: "error -32603; the server's log has the details" } }]);
    expect(h.logged.join('\n')).toContain('"code": "invalid_type"');
  });

  it('closes when its input ends, but only once every request it read has been answered', async () => {
    const h = harness();
    await h.transport.start();
    h.input.end('{"jsonrpc":"2.0","id":"a","method":"ping"}\n{"jsonrpc":"2.0","id":1,"method":"ping"}\n');
    await waitFor(() => h.received.length === 2, 5000, 'two requests');
    expect(h.isClosed()).toBe(false);
    await h.transport.send({ jsonrpc: '2.0', id: 'a', result: {} });
    expect(h.isClosed()).toBe(false); // "a" is answered; 1 is not
    await h.transport.send({ jsonrpc: '2.0', id: 1, result: {} });
    expect(h.isClosed()).toBe(true);
  });
});
