import { describe, expect, it } from 'vitest';
import { z } from 'zod/v4';
import { createToolRegistry, defineTool } from '../../src/tools/registry.js';

const spec = (timeoutMs: unknown) => ({
  name: 'probe',
  description: 'a probe',
  kind: 'read' as const,
  args: z.object({}),
  timeoutMs: timeoutMs as number,
  execute: async () => ({ ok: true }),
});

describe('defineTool', () => {
  it('refuses a timeoutMs that no timer can take, once, at definition (not as a 1 ms timeout at every call)', () => {
    for (const bad of [0, -5, Number.NaN, Number.POSITIVE_INFINITY, '100']) {
      expect(() => defineTool(spec(bad))).toThrow(/tool probe: timeoutMs must be a positive number of milliseconds/);
    }
    expect(defineTool(spec(250)).timeoutMs).toBe(250);
    // Longer than a timer can hold: the call simply has no timer (tools/deadline.ts).
    expect(defineTool(spec(2 ** 40)).timeoutMs).toBe(2 ** 40);
  });
});

describe('createToolRegistry', () => {
  it('refuses a tool built by hand with a kind the gate does not know: it would escape the write budget and every hook filtered by kind', () => {
    const made = defineTool(spec(250));
    const exec = { ...made, name: 'run_shell', kind: 'exec' } as unknown as typeof made;
    expect(() => createToolRegistry([exec])).toThrow('tool run_shell: kind must be read or write, not "exec"');
    expect(() => createToolRegistry([made]).register({ ...made, name: 'nameless', kind: undefined } as unknown as typeof made)).toThrow('tool nameless: kind must be read or write, not undefined');
    expect(createToolRegistry([made]).get('probe')?.kind).toBe('read');
  });
});
