/** Loading the plugins named in configuration into a hook registry (once per worker thread). */
import { type HookRegistry, type HookRegistryOptions, type Plugin, createHookRegistry } from './hooks.js';
import { moduleUrl } from './module-url.js';
import { taskEnforcer } from './task-enforcer.js';

export interface PluginSpec {
  /** A built-in plugin's name (`task_enforcer`), a file path, or a package specifier. */
  module: string;
  options?: Record<string, unknown>;
}

/** A Map: a spec is configuration text, and `constructor` must not name a built-in. */
const BUILT_IN: ReadonlyMap<string, Plugin> = new Map([['task_enforcer', taskEnforcer]]);

async function resolvePlugin(spec: string): Promise<Plugin> {
  const builtIn = BUILT_IN.get(spec);
  if (builtIn !== undefined) return builtIn;
  const url = moduleUrl(spec, 'plugin');
  let mod: { plugin?: unknown; default?: unknown };
  try {
    mod = (await import(url)) as { plugin?: unknown; default?: unknown };
  } catch (err) {
    throw new Error(`plugin module ${spec} failed to load: ${err instanceof Error ? err.message : String(err)}`);
  }
  const plugin = (mod.plugin ?? mod.default) as Plugin | undefined;
  if (plugin === undefined) throw new Error(`plugin module ${spec} must export \`plugin\` (or a default export): { name, register(api, options) }`);
  return plugin;
}

/** Loads every plugin in order, then closes registration. Any problem is an error: a gate that did not load must not run open. */
export async function loadPlugins(specs: PluginSpec[], opts: HookRegistryOptions = {}): Promise<HookRegistry> {
  const registry = createHookRegistry(opts);
  for (const spec of specs) await registry.use(await resolvePlugin(spec.module), spec.options ?? {});
  registry.close();
  return registry;
}
