import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod/v4';
import { checkCard, type Envelope } from '../../src/engine/index.js';
import { ACCEPTANCE_CHECKS, FINAL_STATE_READS } from '../../src/engine/cards.js';
import { builtInTools } from '../../src/tools/builtin.js';
import { createToolRegistry, defineTool } from '../../src/tools/registry.js';
import { type AcceptanceReport, DETAIL_CHARS, FINAL_STATE_BYTES, lookup } from '../../src/workers/acceptance.js';
import { ACCEPT_GRACE_MS } from '../../src/workers/loop-calls.js';
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

/**
 * What one agent's card can make acceptance hold (session 33's review, F2/F3): a card listed
 * 5,000 final-state reads of a big task; acceptance held its thread for seconds, ~3 GB of
 * memory, and stored a 451 MB envelope (or one too big to serialise).
 */
describe('acceptance is bounded', () => {
  it(`a card lists at most ${FINAL_STATE_READS} final-state reads`, () => {
    const reads = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`r${i}`, { tool: 'noop', args: {} }]));
    expect(checkCard(card({ final_state: reads(FINAL_STATE_READS) })).ok).toBe(true);
    const over = checkCard(card({ final_state: reads(FINAL_STATE_READS + 1) }));
    expect(over.ok).toBe(false);
    expect(over.ok ? [] : over.problems).toEqual([`final_state: at most ${FINAL_STATE_READS} reads`]);
  });

  it('reads that return more than FINAL_STATE_BYTES together: the one that crosses it and those after it are unreachable, unread, and the run fails with a small envelope', async () => {
    const h = harness();
    const file = join(h.dir, 'big.json');
    // Each value ~60 KB (under kv_get's 64 KiB cap); five of them cross 256 KiB.
    writeFileSync(file, JSON.stringify({ v: 'x'.repeat(60_000) }));
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    const { result } = await runCard(h, card({
      allowed_tools: ['kv_get'],
      final_state: Object.fromEntries(names.map((n) => [n, { tool: 'kv_get', args: { file, key: 'v' } }])),
      acceptance: { checks: [{ id: 'read', path: 'a.key', equals: 'v' }] },
    }));
    expect(result.phase).toBe('failed');
    expect(result.stopReason).toBe('acceptance_failed');
    const report = result.envelope!.acceptance as AcceptanceReport;
    expect(Object.keys(report.final_state)).toEqual(['a', 'b', 'c', 'd']);
    expect(report.unreachable).toEqual([
      `e: the final state's reads returned over ${FINAL_STATE_BYTES} bytes together (read less: narrower reads, or fewer)`,
      `f: not read: the final state's reads returned over ${FINAL_STATE_BYTES} bytes together (read less: narrower reads, or fewer)`,
    ]);
    expect(report.checks).toEqual([{ id: 'read', passed: true, detail: 'a.key = "v"' }]);
    // What is stored is bounded too: the run's envelope and the task's result.
    const stored = (await h.tm.getTask(result.taskId)).result as Envelope;
    expect(JSON.stringify(stored).length).toBeLessThan(FINAL_STATE_BYTES + 10_000);
    expect(Object.keys((stored.acceptance as AcceptanceReport).final_state)).toEqual(['a', 'b', 'c', 'd']);
  });

  it("the thread's other work gets turns between final-state reads that never wait on I/O", async () => {
    const h = harness();
    let first = Infinity;
    let last = 0;
    const spin = defineTool({
      name: 'spin',
      description: 'Works 3 ms on the thread, then answers.',
      kind: 'read',
      args: z.object({}),
      execute: async () => {
        const start = performance.now();
        first = Math.min(first, start);
        while (performance.now() - start < 3);
        last = performance.now();
        return { spun: true };
      },
    });
    // Another run's work on the same thread, as a turn of the event loop each time it gets one.
    const turns: number[] = [];
    let ticking = true;
    const tick = () => {
      turns.push(performance.now());
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const { result } = await runCard(h, card({
      allowed_tools: ['spin'],
      final_state: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`s${i}`, { tool: 'spin', args: {} }])),
    }), { tools: createToolRegistry([...builtInTools(), spin]) });
    ticking = false;
    expect(result.phase).toBe('completed');
    // 40 reads of 3 ms each (~120 ms): without a turn between them, none of the ticks fell inside.
    const during = turns.filter((t) => t > first && t < last).length;
    expect(during).toBeGreaterThanOrEqual(20);
  });

  it(`a run without a deadline gives its final-state reads ${ACCEPT_GRACE_MS} ms together: the reads after it are cut off`, async () => {
    const h = harness();
    // The run's clock jumps past the grace at the first read (as if it had taken that long).
    let skew = 0;
    const slow = defineTool({
      name: 'slow_read',
      description: 'Answers after 50 ms.',
      kind: 'read',
      args: z.object({}),
      execute: async () => {
        skew += ACCEPT_GRACE_MS + 1000;
        await new Promise((resolve) => setTimeout(resolve, 50));
        return { read: true };
      },
    });
    const { result } = await runCard(h, card({
      allowed_tools: ['slow_read'],
      final_state: { a: { tool: 'slow_read', args: {} }, b: { tool: 'slow_read', args: {} } },
    }), { tools: createToolRegistry([...builtInTools(), slow]), now: () => Date.now() + skew });
    expect(result.phase).toBe('failed');
    const report = result.envelope!.acceptance as AcceptanceReport;
    expect(Object.keys(report.final_state)).toEqual(['a']);
    expect(report.unreachable).toEqual([expect.stringMatching(/^b: slow_read: cut off at the run's deadline after \d+ ms$/)]);
  });

  it(`a card lists at most ${ACCEPTANCE_CHECKS} checks; a check's detail shows at most ${DETAIL_CHARS} characters of the value it read`, async () => {
    const checks = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `c${i}`, path: 'a.value', equals: 'no' }));
    const over = checkCard(card({ acceptance: { checks: checks(ACCEPTANCE_CHECKS + 1) } }));
    expect(over.ok ? [] : over.problems).toEqual([`acceptance.checks: at most ${ACCEPTANCE_CHECKS} checks`]);
    const h = harness();
    const file = join(h.dir, 'big.json');
    writeFileSync(file, JSON.stringify({ v: 'x'.repeat(60_000) }));
    // Before, each check's detail repeated the whole 60 KB value: 100 checks, 6 MB in the envelope.
    const { result } = await runCard(h, card({
      allowed_tools: ['kv_get'],
      final_state: { a: { tool: 'kv_get', args: { file, key: 'v' } } },
      acceptance: { checks: [...checks(ACCEPTANCE_CHECKS - 1), { id: 'in', path: 'a.value', in: ['y', 'x'.repeat(60_000)] }] },
    }));
    expect(result.phase).toBe('failed');
    const report = result.envelope!.acceptance as AcceptanceReport;
    expect(report.failed).toHaveLength(ACCEPTANCE_CHECKS - 1);
    expect(report.checks.at(-1)).toEqual({ id: 'in', passed: true, detail: `a.value = "${'x'.repeat(DETAIL_CHARS - 1)}… (60002 characters)` });
    expect(JSON.stringify(await h.tm.getTask(result.taskId).then((t) => t.result)).length).toBeLessThan(60_000 + ACCEPTANCE_CHECKS * 400);
  });
});
