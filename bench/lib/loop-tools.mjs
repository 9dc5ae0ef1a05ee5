/**
 * The tool module of the loop benchmark, loaded by every daemon worker thread through
 * `--tools`. `stamp` is a read tool that returns the wall-clock time at which it ran, in µs
 * (performance.timeOrigin + performance.now()), and CLOCK_MONOTONIC in ns
 * (process.hrtime.bigint(), one clock for every process on the machine) as a string.
 */
import { z } from 'zod';
import { defineTool } from '../../dist/tools/registry.js';

export const tools = [
  defineTool({
    name: 'stamp',
    description: 'Returns the time it ran: at_us (epoch µs) and mono_ns (CLOCK_MONOTONIC ns, a string).',
    kind: 'read',
    args: z.object({}),
    execute: async () => ({
      at_us: performance.timeOrigin * 1000 + performance.now() * 1000,
      mono_ns: process.hrtime.bigint().toString(),
    }),
  }),
];
