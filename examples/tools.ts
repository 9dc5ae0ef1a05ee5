// A tools module: `taskloop daemon --tools ./tools.js`, or `toolModules` of startDaemon.
// It exports `tools`, an array of defineTool(...) results. The schema comes from `zod/v4`,
// which works with zod 3.25 and zod 4 alike.
import { z } from 'zod/v4';
import { defineTool } from 'taskloop/tools';

const counters = new Map<string, number>();

export const tools = [
  defineTool({
    name: 'counter_get',
    description: 'Reads a named counter (0 when never bumped).',
    kind: 'read',
    args: z.object({ name: z.string().min(1).max(64) }),
    execute: async ({ name }) => ({ name, value: counters.get(name) ?? 0 }),
  }),
  defineTool({
    name: 'counter_bump',
    description: 'Adds one to a named counter listed in the card scope `counters`.',
    kind: 'write',
    target: { arg: 'name', scope: 'counters' },
    idempotent: false,
    args: z.object({ name: z.string().min(1).max(64) }),
    execute: async ({ name }, ctx) => {
      if (ctx.signal.aborted) throw new Error('stopped');
      const value = (counters.get(name) ?? 0) + 1;
      counters.set(name, value);
      return { name, value };
    },
  }),
];
