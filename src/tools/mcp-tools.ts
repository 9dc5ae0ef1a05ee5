/**
 * Which tools an MCP server may hand an agent, beside the task tools (`taskloop mcp --tools`,
 * `taskloop serve --mcp-tools`). A tool served over MCP is a power given to the model with
 * no run around it: no card, so no allowlist, no scope, no budget and no approval. So a
 * module's tool is served only when none of those is what keeps it safe:
 *
 * - a high-risk tool is refused: its calls need an operator's approval, and only a run's gate
 *   asks for one, so serving it would skip the approval;
 * - a write tool that names a target (`target: {arg, scope}`) is refused: the card's scope is
 *   what bounds which targets it may touch, and over MCP there is no card, so it would reach
 *   every target;
 * - a tool that needs something of the card (its `checkCard` finds problems with a card that
 *   grants nothing, e.g. a launch allowlist) is refused for the same reason;
 * - an operatorOnly tool (the desktop's) is refused: only an operator's card may allow it, and
 *   an MCP client is an agent;
 * - every call is still admitted by the tool's own `admit` against that card that grants
 *   nothing, runs within the tool's timeout and output cap, and passes the server's gate
 *   (the CLI's: task_enforcer, so a write tool needs a claimed or in-progress task).
 *
 * Only the modules named are served: the built-in demo, basic and desktop tools never are.
 * Refusals are one-line Errors naming the tool; the CLI makes them usage errors.
 */
import { type TaskCard, cardSchema } from '../engine/index.js';
import { type Tool, createToolRegistry } from './registry.js';
import { strictParameters } from './strict-schema.js';
import { taskTools } from './task-tools.js';

/** The card an MCP call is judged against: it allows the tool called and grants nothing else. */
export function mcpCard(tool: string): TaskCard {
  return cardSchema.parse({ goal: 'a call over MCP', allowed_tools: [tool] });
}

/** Why `tool` may not be served over MCP, or null when it may. */
export function whyNotServable(tool: Tool): string | null {
  if (tool.risk === 'high') return `tool ${tool.name} is high-risk: its calls need an approval, which only a run asks for, so it is not served over MCP (give it to a task card instead)`;
  if (tool.target !== null) {
    return `tool ${tool.name} writes a target (${tool.target.arg}) that a card's scope.${tool.target.scope} must list; over MCP there is no card, so it is not served`;
  }
  const problems = tool.checkCard(mcpCard(tool.name));
  if (problems.length > 0) return `tool ${tool.name} needs a card that configures it (${problems[0]}), so it is not served over MCP`;
  if (tool.operatorOnly) return `tool ${tool.name} is operator-only (only a card an operator wrote may allow it), so it is not served to an agent over MCP`;
  return null;
}

/**
 * The tools an MCP server serves: the task tools, then `extra` (the modules' tools). Throws
 * a one-line Error for a tool that may not be served or a name served twice.
 */
export function mcpTools(extra: Tool[] = []): Tool[] {
  for (const tool of extra) {
    const why = whyNotServable(tool);
    if (why !== null) throw new Error(why);
  }
  return createToolRegistry([...taskTools, ...extra]).list();
}

/** What `tools/list` says of a tool's arguments: its JSON Schema, or the strict-mode form (strict-schema.ts). */
export function listedSchema(tool: Tool, strict: boolean): Record<string, unknown> {
  return strict ? strictParameters(tool.parameters, tool.name) : tool.parameters;
}

/** The first tool whose arguments strict mode cannot express, as a one-line reason; null when all can. */
export function strictProblem(tools: Tool[]): string | null {
  for (const tool of tools) {
    try {
      strictParameters(tool.parameters, tool.name);
    } catch (err) {
      return `strict schemas cannot be served: ${(err as Error).message}`;
    }
  }
  return null;
}
