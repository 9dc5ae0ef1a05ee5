/** A real MCP client connected in memory to a task-tools server acting as `agent`. */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { onTestFinished } from 'vitest';
import type { TaskManager } from '../../src/engine/index.js';
import { createMcpServer } from '../../src/tools/mcp-server.js';
import { taskTools } from '../../src/tools/task-tools.js';

export async function taskToolsClient(manager: TaskManager, agent: string, log: (line: string) => void = () => undefined): Promise<Client> {
  const server = createMcpServer({ agent, manager, tools: taskTools, log });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const client = new Client({ name: 'taskloop-test', version: '1.0.0' });
  await client.connect(clientSide);
  onTestFinished(() => client.close());
  return client;
}
