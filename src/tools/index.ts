/**
 * `taskloop/tools`: what a tools module needs — defineTool and its types — and the built-in
 * tool sets. Light to import: the engine and the tools, no daemon, no servers.
 */
export {
  defineTool,
  createToolRegistry,
  toOpenAiFunction,
  type Tool,
  type ToolSpec,
  type ToolContext,
  type ToolServices,
  type ToolKind,
  type ToolRisk,
  type ToolRegistry,
  type OpenAiFunction,
} from './registry.js';
export { builtInTools } from './builtin.js';
export { taskTools } from './task-tools.js';
export { ticketTools, type Ticket } from './tickets.js';
export { basicTools } from './basic.js';
export { desktopTools } from './desktop/tools.js';
