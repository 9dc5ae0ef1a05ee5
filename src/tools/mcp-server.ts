/**
 * The task tools over MCP, so any MCP-speaking agent can use the engine: over stdio
 * (`taskloop mcp --agent NAME`, below) and over Streamable HTTP on `taskloop serve`
 * (src/monitor/http/mcp-endpoint.ts), one server per session. The server's agent identity is
 * fixed when it is created (the stdio server's `--agent`, the HTTP session's token): every
 * call acts as that agent, whatever the model puts in the arguments, and may not be a
 * reserved name (the operator's or a system actor's).
 *
 * What reaches the model is an engine refusal (its stable code and one-line message) or a
 * generic TOOL_FAILED naming the tool (mcp-call.ts); an internal error's own text (a stack, a
 * path, SQL) goes to the server's log, never to the model. Those are tool results
 * (`isError: true`); protocol-level problems are JSON-RPC errors: a tool the server does not
 * serve is -32602 `Unknown tool: NAME`, as the MCP specification's tools page names it, and
 * on stdio every line gets one when it is refused (mcp-transport.ts): -32700, -32600,
 * -32601, or -32602 for params of the wrong shape or nested deeper than LIMITS.jsonDepth.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ErrorCode, InitializeRequestSchema, ListToolsRequestSchema, PingRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type TaskManager, assertBindableName } from '../engine/index.js';
import { type McpGate, callTool } from './mcp-call.js';
import { type RequestSchemas, oneLine } from './mcp-message.js';
import { listedSchema, strictProblem } from './mcp-tools.js';
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
  /** The tools served (mcpTools: the task tools and the modules' tools that may be served). */
  tools: Tool[];
  /**
   * List the tools' arguments in the form OpenAI's strict mode accepts (strict-schema.ts);
   * calls accept both forms either way. Throws when a tool's arguments cannot be put so.
   * @defaultValue false
   */
  strict?: boolean;
  /** Judges each call after its arguments parsed (the CLI's: task_enforcer). @defaultValue every call passes */
  gate?: McpGate;
  /** @defaultValue the package version */
  version?: string;
  /** Where internal errors are reported. @defaultValue standard error */
  log?: (line: string) => void;
}

/**
 * An error the SDK answers as a JSON-RPC error with this code and exactly this message (its
 * McpError would prefix the message with "MCP error CODE: ").
 */
class ProtocolError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

export function createMcpServer(opts: McpServerOptions): Server {
  assertBindableName(opts.agent, '--agent');
  const strict = opts.strict === true;
  if (strict) {
    const problem = strictProblem(opts.tools);
    if (problem !== null) throw new Error(problem);
  }
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const byName = new Map(opts.tools.map((t) => [t.name, t]));
  const listed = opts.tools.map((t) => ({
    name: t.name,
    description: t.description,
    inputSchema: { type: 'object' as const, ...listedSchema(t, strict) },
    annotations: { readOnlyHint: t.kind === 'read', destructiveHint: t.kind === 'write', idempotentHint: t.idempotent },
  }));
  const server = new Server({ name: 'taskloop', version: opts.version ?? '0.1.0' }, { capabilities: { tools: {} } });
  server.onerror = (err) => log(`taskloop mcp: ${err.message.split('\n')[0]}`);

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: listed }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = byName.get(request.params.name);
    if (tool === undefined) throw new ProtocolError(ErrorCode.InvalidParams, `Unknown tool: ${oneLine(request.params.name).slice(0, 100)}`);
    return callTool(tool, request.params.arguments, { agent: opts.agent, manager: opts.manager, gate: opts.gate, log }, extra.signal);
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
