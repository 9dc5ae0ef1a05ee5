/**
 * One `tools/call` over MCP, as a run would hold it: arguments parsed by the tool's schema,
 * the tool's own admission against a card that grants nothing (mcp-tools.ts), the server's
 * gate, then the call within the tool's timeout (a tool that ignores its signal still loses
 * the race) and output cap. Every refusal is a tool result (`isError: true`) carrying
 * `{"error": {"code", "message"}}`: an engine code, FORBIDDEN for an admission or gate
 * refusal, TOOL_FAILED for a timeout, an oversized result or an internal error (whose own
 * text goes to the log, never to the model); TOOL_OUTCOME_UNKNOWN for a write that timed out
 * (it may have taken effect). A write whose output is refused succeeded: `{output_dropped}`.
 */
import { randomUUID } from 'node:crypto';
import { type TaskManager, depthMessage, isEngineError, nestsDeeper } from '../engine/index.js';
import { printable } from '../engine/text.js';
import { deadline } from './deadline.js';
import { mcpCard } from './mcp-tools.js';
import type { Tool } from './registry.js';

/** A call the server's gate judges, after its arguments parsed. */
export interface McpCall {
  tool: Tool;
  args: Record<string, unknown>;
  /** The agent the server acts as. */
  agent: string;
  signal: AbortSignal;
}

/** The server's gate: passes (possibly rewritten arguments, parsed again) or refuses with a reason. */
export type McpGate = (call: McpCall) => Promise<{ ok: true; args: Record<string, unknown> } | { ok: false; reason: string }>;

export interface CallResult {
  [key: string]: unknown;
  content: Array<{ type: 'text'; text: string }>;
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export interface CallOptions {
  agent: string;
  manager: TaskManager;
  gate?: McpGate;
  log: (line: string) => void;
}

const answer = (result: Record<string, unknown>): CallResult => ({ content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result });

// The message may quote what another agent wrote (a name, a key): its controls, bidi
// overrides and marks escaped as in the JSON-RPC errors (mcp-message.ts), since a client
// shows it to a person. Not shortened: the model reads it to mend its call.
const failure = (code: string, message: string): CallResult => ({
  isError: true,
  content: [{ type: 'text', text: JSON.stringify({ error: { code, message: printable(message) } }) }],
});

/** Runs one call of `tool` with the raw `arguments` a client sent; never throws. */
export async function callTool(tool: Tool, raw: unknown, opts: CallOptions, clientSignal: AbortSignal): Promise<CallResult> {
  const limit = deadline(clientSignal, tool.timeoutMs);
  const { signal } = limit;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  // Once the tool runs, a write that does not answer may have taken effect.
  let executing = false;
  try {
    let args = tool.parse(raw ?? {});
    const refused = tool.admit(args, mcpCard(tool.name));
    if (refused !== null) return failure('FORBIDDEN', `${tool.name}: ${refused}`);
    if (opts.gate !== undefined) {
      const verdict = await Promise.race([opts.gate({ tool, args, agent: opts.agent, signal }), aborted]);
      if (!verdict.ok) return failure('FORBIDDEN', `${tool.name}: ${verdict.reason}`);
      args = tool.parse(verdict.args);
    }
    executing = true;
    const result = await Promise.race([
      tool.execute(args, { signal, taskId: 0, runId: 0, agent: opts.agent, idempotencyKey: randomUUID(), services: { manager: opts.manager } }),
      aborted,
    ]);
    // A write did its work whatever its output: it succeeded, without that output.
    const unanswered = (message: string): CallResult => (tool.kind === 'write' ? answer({ output_dropped: message }) : failure('TOOL_FAILED', message));
    if (nestsDeeper(result)) return unanswered(`${tool.name}: its output ${depthMessage()}`);
    let text: string;
    try {
      text = JSON.stringify(result ?? null);
    } catch (err) {
      return unanswered(`${tool.name}: its output cannot be written as JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    const size = Buffer.byteLength(text, 'utf8');
    if (size > tool.maxOutputBytes) return unanswered(`${tool.name}: output of ${size} bytes exceeds the cap of ${tool.maxOutputBytes}`);
    const structured = typeof result === 'object' && result !== null && !Array.isArray(result) ? { structuredContent: result as Record<string, unknown> } : {};
    return { content: [{ type: 'text', text }], ...structured };
  } catch (err) {
    // A write that timed out, or that its client cancelled, may have taken effect (a tool that
    // ignores its signal goes on; one that honours it may have been cut off after its effect).
    const cut = limit.timedOut() && !clientSignal.aborted ? `timed out after ${tool.timeoutMs} ms` : clientSignal.aborted ? 'cancelled by the client' : undefined;
    if (cut !== undefined) {
      return tool.kind === 'write' && executing
        ? failure('TOOL_OUTCOME_UNKNOWN', `${tool.name}: ${cut}; it may or may not have taken effect`)
        : failure('TOOL_FAILED', `${tool.name}: ${cut}`);
    }
    if (isEngineError(err)) return failure(err.code, err.message.split('\n')[0]!);
    opts.log(`taskloop mcp: ${tool.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return failure('TOOL_FAILED', `${tool.name} failed inside the server; its operator can read why in the server's log`);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    limit.release();
  }
}
