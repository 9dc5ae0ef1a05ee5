/**
 * definePlugin: a plugin's metadata checked where it is written, not first when a worker
 * thread loads it (fastify's lesson: check plugin metadata at registration). Whether the
 * plugin registers a hook is still checked when it is loaded (hooks.ts `use`).
 */
import { EngineError } from '../engine/index.js';
import type { Plugin } from './hooks.js';

/** What a plugin may be called: the names its errors and the hook log carry. */
const PLUGIN_NAME = /^[A-Za-z0-9][A-Za-z0-9._@/-]{0,99}$/;

export function definePlugin(plugin: Plugin): Plugin {
  if (typeof plugin !== 'object' || plugin === null) {
    throw new EngineError('VALIDATION_FAILED', 'definePlugin: a plugin is an object { name, register(api, options) }');
  }
  if (typeof plugin.name !== 'string' || !PLUGIN_NAME.test(plugin.name)) {
    throw new EngineError('VALIDATION_FAILED', `definePlugin: name ${JSON.stringify(plugin.name)} must match ${PLUGIN_NAME}`);
  }
  if (typeof plugin.register !== 'function') {
    throw new EngineError('VALIDATION_FAILED', `definePlugin: plugin ${plugin.name} has no register(api, options) function`);
  }
  return Object.freeze({ name: plugin.name, register: plugin.register });
}
