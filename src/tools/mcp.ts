/**
 * `taskloop/mcp`: the task tools over MCP. A subpath of its own because its declarations
 * carry the MCP SDK's (`Server`), and those name the DOM's `HeadersInit`: a project that
 * typechecks libraries (skipLibCheck: false) adds "DOM" to `lib` when it imports this.
 */
export { createMcpServer, serveStdio, type McpServerOptions } from './mcp-server.js';
