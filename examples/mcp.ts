// The task tools over MCP, in process: an SDK client talks to createMcpServer through the
// SDK's in-memory transport (in production: `taskloop mcp`, or any SDK transport).
// Its declarations carry the MCP SDK's, which need "DOM" in `lib` (see tsconfig.mcp.json).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { openStore } from 'taskloop';
import { createMcpServer } from 'taskloop/mcp';
import { taskTools } from 'taskloop/tools';

const dir = mkdtempSync(join(tmpdir(), 'taskloop-example-mcp-'));
try {
  const store = await openStore({ path: join(dir, 'tasks.db') });
  const server = createMcpServer({ agent: 'researcher', manager: store.tm, tools: taskTools, log: () => undefined });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'example', version: '1.0.0' });
  await client.connect(clientSide);
  const listed = await client.listTools();
  const created = await client.callTool({ name: 'task_create', arguments: { title: 'Read the paper' } });
  if (created.isError === true) throw new Error(JSON.stringify(created.content));
  const tasks = await store.tm.findTasks({ creator: 'researcher' });
  await client.close();
  await store.close();
  if (tasks.length !== 1) throw new Error(`expected one task by researcher, found ${tasks.length}`);
  console.log(`ok mcp: ${listed.tools.length} tools listed; task ${tasks[0]!.id} created by researcher`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
