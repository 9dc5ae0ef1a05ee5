import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type AcceptanceReport, lookup } from '../../src/workers/acceptance.js';
import { card, harness, runCard } from './harness.js';

const PROTOTYPE_NAMES = ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'];

describe('acceptance paths read own properties only', () => {
  it('lookup finds own properties and array items, never what an object inherits', () => {
    const state = { ticket: { priority: 'urgent', tags: ['a', 'b'], owner: null } };
    expect(lookup(state, 'ticket.priority')).toEqual({ found: true, value: 'urgent' });
    expect(lookup(state, 'ticket.tags.1')).toEqual({ found: true, value: 'b' });
    expect(lookup(state, 'ticket.owner')).toEqual({ found: true, value: null });
    expect(lookup(state, 'ticket.owner.name')).toEqual({ found: false, value: undefined });
    for (const name of PROTOTYPE_NAMES) {
      expect(lookup(state, `ticket.${name}`), name).toEqual({ found: false, value: undefined });
      expect(lookup(state, `ticket.tags.${name}`), name).toEqual({ found: false, value: undefined });
      expect(lookup(state, name), name).toEqual({ found: false, value: undefined });
    }
    expect(lookup(state, 'ticket.constructor.name')).toEqual({ found: false, value: undefined });
    // An own key of that name is found like any other (JSON.parse makes `__proto__` an own key).
    expect(lookup(JSON.parse('{"t": {"__proto__": 1, "constructor": 2}}'), 't.__proto__')).toEqual({ found: true, value: 1 });
    expect(lookup(JSON.parse('{"t": {"__proto__": 1, "constructor": 2}}'), 't.constructor')).toEqual({ found: true, value: 2 });
  });

  it('in a run, exists on a prototype name is false and equals cannot reach a prototype value', async () => {
    const h = harness();
    const file = join(h.dir, 'kv.json');
    writeFileSync(file, JSON.stringify({ status: 'open' }));
    const checks = [
      ...PROTOTYPE_NAMES.map((name) => ({ id: `no_${name}`, path: `status.${name}`, exists: false })),
      { id: 'own', path: 'status.value', equals: 'open' },
    ];
    const { result } = await runCard(h, card({
      allowed_tools: ['kv_get'],
      final_state: { status: { tool: 'kv_get', args: { file, key: 'status' } } },
      acceptance: { checks },
    }));
    expect(result.phase).toBe('completed');
    expect((result.envelope!.acceptance as AcceptanceReport).checks.filter((c) => c.passed).map((c) => c.id)).toEqual([...PROTOTYPE_NAMES.map((n) => `no_${n}`), 'own']);

    const reached = await runCard(h, card({
      allowed_tools: ['kv_get'],
      final_state: { status: { tool: 'kv_get', args: { file, key: 'status' } } },
      acceptance: { checks: [{ id: 'proto', path: 'status.constructor.name', equals: 'Object' }, { id: 'exists', path: 'status.toString', exists: true }] },
    }));
    expect(reached.result.phase).toBe('failed');
    expect((reached.result.envelope!.acceptance as AcceptanceReport).checks).toEqual([
      { id: 'proto', passed: false, detail: 'status.constructor.name is missing from the final state' },
      { id: 'exists', passed: false, detail: 'status.toString is missing' },
    ]);
  });
});
