/**
 * MCP over Streamable HTTP from the test side: the SDK's real Client and
 * StreamableHTTPClientTransport, and raw requests on node:http (which, unlike fetch, may set
 * any Host header) for what a well-behaved client never sends.
 */
import { request } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import { onTestFinished } from 'vitest';

export type ToolResult = { content: Array<{ type: string; text: string }>; isError?: boolean };
/** The JSON a tool result carries. */
export const body = (r: unknown) => JSON.parse((r as ToolResult).content[0]!.text) as Record<string, any>;

export interface Connected {
  client: Client;
  transport: StreamableHTTPClientTransport;
}

/** A real SDK client connected to `<url><path>` with the bearer token; closed when the test ends. */
export async function connectHttp(url: string, token: string | undefined, path = '/mcp'): Promise<Connected> {
  const client = new Client({ name: 'taskloop-http-test', version: '1.0.0' });
  const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` };
  const transport = new StreamableHTTPClientTransport(new URL(`${url}${path}`), { requestInit: { headers } });
  await client.connect(transport);
  onTestFinished(() => client.close());
  return { client, transport };
}

export interface RawReply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  json: any;
}

export const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** One request to `<url>/mcp` (or `path`) with the headers a Streamable HTTP client sends, plus `headers`. */
export function rawMcp(url: string, method: string, payload: unknown, headers: Record<string, string> = {}, path = '/mcp'): Promise<RawReply> {
  const text = payload === undefined ? '' : typeof payload === 'string' ? payload : JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    // A fresh connection each time (no keep-alive agent), so each request is judged alone.
    const req = request(`${url}${path}`, {
      method,
      agent: false,
      headers: {
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-protocol-version': LATEST_PROTOCOL_VERSION,
        'content-length': String(Buffer.byteLength(text)),
        ...headers,
      },
    }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => void (data += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, json: data === '' ? null : JSON.parse(data) }));
    });
    req.on('error', reject);
    req.end(text);
  });
}
