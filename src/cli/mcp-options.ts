/**
 * What `taskloop mcp` and `taskloop serve`'s MCP endpoint serve, from the same flags: the task
 * tools plus the tools of `--tools` modules that may be served over MCP (src/tools/mcp-tools.ts
 * says which, and why), and a gate made of the plugins (`--plugin`, default task_enforcer), so
 * a module's write tool needs a claimed or in-progress task over MCP as it does in a run.
 */
import { type TaskManager, isEngineError } from '../engine/index.js';
import { loadPlugins } from '../plugins/load.js';
import type { McpGate } from '../tools/mcp-call.js';
import { mcpCard, mcpTools } from '../tools/mcp-tools.js';
import type { Tool } from '../tools/registry.js';
import { loadToolModules } from '../workers/tool-modules.js';
import { UsageError } from './context.js';
import { pluginSpecs } from './parse.js';

export interface McpServing {
  tools: Tool[];
  gate: McpGate;
}

/** Loads the tools and plugins; a module that fails or a tool that may not be served is a usage error. */
export async function mcpServing(manager: TaskManager, modules: string[] | undefined, plugins: string[] | undefined, pluginConfig: string | undefined): Promise<McpServing> {
  let tools: Tool[];
  let hooks;
  try {
    tools = mcpTools(await loadToolModules(modules ?? []));
    hooks = await loadPlugins(pluginSpecs(plugins, pluginConfig));
  } catch (err) {
    if (isEngineError(err)) throw err;
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const gate: McpGate = ({ tool, args, agent, signal }) =>
    hooks.toolBefore({ tool: tool.name, kind: tool.kind, risk: tool.risk, args, taskId: 0, runId: 0, agent, card: mcpCard(tool.name), signal, services: { manager } });
  return { tools, gate };
}
