/**
 * The task tools over MCP (stdio), so any MCP-speaking agent can use the engine. The
 * server's agent identity is fixed when it starts (`taskloop mcp --agent NAME`): every
 * call acts as that agent, whatever the model puts in the arguments.
 */
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type TaskManager, isEngineError } from '../engine/index.js';
import type { Tool } from './registry.js';

export interface McpServerOptions {
  agent: string;
  manager: TaskManager;
  tools: Tool[];
  /** @defaultValue the package version */
  version?: string;
}

export function createMcpServer(opts: McpServerOptions): Server {
  const byName = new Map(opts.tools.map((t) => [t.name, t]));
  const server = new Server({ name: 'taskloop', version: opts.version ?? '0.1.0' }, { capabilities: { tools: {} } });

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
      if (isEngineError(err)) return fail(err.code, err.message);
      return fail('TOOL_FAILED', err instanceof Error ? err.message : String(err));
    }
  });
  return server;
}

/** Serves on stdin/stdout until the client closes the stream. */
export async function serveStdio(opts: McpServerOptions): Promise<void> {
  const server = createMcpServer(opts);
  const closed = new Promise<void>((resolve) => {
    server.onclose = () => resolve();
  });
  await server.connect(new StdioServerTransport());
  await closed;
}
