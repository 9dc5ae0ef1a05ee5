/**
 * `taskloop/plugins`: what a plugin module needs — definePlugin, the hook names and their
 * payloads — and the built-in task_enforcer.
 */
export { definePlugin } from './define.js';
export {
  HOOK_NAMES,
  createHookRegistry,
  type HookName,
  type HookHandler,
  type HookPayloads,
  type HookRegistry,
  type HookRegistryOptions,
  type Plugin,
  type PluginApi,
  type ToolBeforeResult,
  type ToolCallContext,
  type ToolHookOptions,
  type Verdict,
  type Verifier,
  type VerifyInput,
} from './hooks.js';
export { loadPlugins, type PluginSpec } from './load.js';
export { taskEnforcer } from './task-enforcer.js';
