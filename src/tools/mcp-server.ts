/**
 * The task tools over MCP (stdio), so any MCP-speaking agent can use the engine. The
 * server's agent identity is fixed when it starts (`taskloop mcp --agent NAME`): every
 * call acts as that agent, whatever the model puts in the arguments, and may not be a
 * reserved name (the operator's or a system actor's).
 *
 * What reaches the model is an engine refusal (its stable code and one-line message) or a
 * generic TOOL_FAILED naming the tool; an internal error's own text (a stack, a path, SQL)
 * goes to the server's log, never to the model. Those are tool results (`isError: true`);
 * only protocol-level problems are JSON-RPC errors, and on stdio every line gets one when it
 * is refused (mcp-transport.ts): -32700, -32600, -32601, or -32602 for params of the wrong
 * shape or nested deeper than LIMITS.jsonDepth.
 */
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, InitializeRequestSchema, ListToolsRequestSchema, PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type TaskManager, assertBindableName, isEngineError } from '../engine/index.js';
import type { RequestSchemas } from './mcp-message.js';
import { createStdioTransport } from './mcp-transport.js';
import type { Tool } from './registry.js';

/** The requests the server serves, by method; a transport checks their params before the SDK does. */
export const SERVED_REQUESTS: RequestSchemas = {
  initialize: InitializeRequestSchema,
  ping: PingRequestSchema,
  'tools/list': ListToolsRequestSchema,
  'tools/call': CallToolRequestSchema,
};

export interface McpServerOptions {
  agent: string;
  manager: TaskManager;
  tools: Tool[];
  /** @defaultValue the package version */
  version?: string;
  /** Where internal errors are reported. @defaultValue standard error */
  log?: (line: string) => void;
}

export function createMcpServer(opts: McpServerOptions): Server {
  assertBindableName(opts.agent, '--agent');
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const byName = new Map(opts.tools.map((t) => [t.name, t]));
  const server = new Server({ name: 'taskloop', version: opts.version ?? '0.1.0' }, { capabilities: { tools: {} } });
  server.onerror = (err) => log(`taskloop mcp: ${err.message.split('\n')[0]}`);

  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: opts.tools.map((t) => ({
      name: t.name,
      description: t.description,
      inputSchema: { type: 'object' as const, ...t.parameters },
      annotations: { readOnlyHint: t.kind === 'read', destructiveHint: t.kind === 'write', idempotentHint: t.idempotent },
    })),
  }));

  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = byName.get(request.params.name);
    const fail = (code: string, message: string) => ({ isError: true, content: [{ type: 'text' as const, text: JSON.stringify({ error: { code, message } }) }] });
    if (tool === undefined) return fail('VALIDATION_FAILED', `unknown tool ${request.params.name}`);
    try {
      const args = tool.parse(request.params.arguments ?? {});
      const result = await tool.execute(args, {
        signal: extra.signal,
        taskId: 0,
        runId: 0,
        agent: opts.agent,
        idempotencyKey: randomUUID(),
        services: { manager: opts.manager },
      });
      return { content: [{ type: 'text' as const, text: JSON.stringify(result) }], structuredContent: result as Record<string, unknown> };
    } catch (err) {
      if (isEngineError(err)) return fail(err.code, err.message.split('\n')[0]!);
      log(`taskloop mcp: ${tool.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      return fail('TOOL_FAILED', `${tool.name} failed inside the server; its operator can read why in the server's log`);
    }
  });
  return server;
}

/** Serves on stdin/stdout until the client closes its end and every request read is answered. */
export async function serveStdio(opts: McpServerOptions): Promise<void> {
  const server = createMcpServer(opts);
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  await server.connect(createStdioTransport({ requests: SERVED_REQUESTS, ...(opts.log === undefined ? {} : { log: opts.log }) }));
  await closed;
}
