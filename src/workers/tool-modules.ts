/** Loading the tool set a worker offers: the built-in tools plus modules named in configuration. */
import { moduleUrl } from '../plugins/module-url.js';
import { builtInTools } from '../tools/builtin.js';
import { type Tool, type ToolRegistry, createToolRegistry } from '../tools/registry.js';

function isTool(value: unknown): value is Tool {
  const t = value as Tool;
  return typeof t === 'object' && t !== null && typeof t.name === 'string' && typeof t.execute === 'function' && typeof t.parse === 'function';
}

/** Imports each module (a path, or a package specifier) and registers its exported `tools` beside the built-in ones. */
export async function loadTools(modules: string[]): Promise<ToolRegistry> {
  return createToolRegistry([...builtInTools(), ...(await loadToolModules(modules))]);
}

/** The tools the modules export, in order, without the built-in ones. Throws a one-line Error for a module that fails. */
export async function loadToolModules(modules: string[]): Promise<Tool[]> {
  const loaded: Tool[] = [];
  for (const spec of modules) {
    const url = moduleUrl(spec, 'tool');
    let mod: { tools?: unknown };
    try {
      mod = (await import(url)) as { tools?: unknown };
    } catch (err) {
      throw new Error(`tool module ${spec} failed to load: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (!Array.isArray(mod.tools) || !mod.tools.every(isTool)) throw new Error(`tool module ${spec} must export \`tools\`, an array of defineTool(...) results`);
    loaded.push(...mod.tools);
  }
  return loaded;
}

