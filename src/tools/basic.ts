/** Small general-purpose tools: waiting, echoing, doing nothing. Useful for demos and benchmarks. */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod/v4';
import { type Tool, defineTool } from './registry.js';

export const noop = defineTool({
  name: 'noop',
  description: 'Does nothing and returns {"ok": true}.',
  kind: 'read',
  args: z.object({}),
  execute: async () => ({ ok: true }),
});

export const echo = defineTool({
  name: 'echo',
  description: 'Returns the text it is given.',
  kind: 'read',
  args: z.object({ text: z.string().max(10_000) }),
  execute: async ({ text }) => ({ text }),
});

export const wait = defineTool({
  name: 'wait',
  description: 'Waits the given number of milliseconds (stops early when the run is stopped).',
  kind: 'read',
  // Above its longest wait: a wait asked for in full is no timeout of the tool's, which the
  // breaker every run shares would count (an agent could open it for everyone).
  timeoutMs: 605_000,
  args: z.object({ ms: z.int().min(0).max(600_000) }),
  execute: async ({ ms }, ctx) => {
    await sleep(ms, undefined, { signal: ctx.signal });
    return { waited_ms: ms };
  },
});

export const basicTools: Tool[] = [noop, echo, wait];
