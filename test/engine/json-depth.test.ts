import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { LIMITS, MAX_JSON_DEPTH, assertTextDepth, isEngineError, nestsDeeper, textNestsDeeper } from '../../src/engine/index.js';
import { defineTool } from '../../src/tools/registry.js';
import { agent, freshManager } from '../helpers.js';

/** `levels` nested arrays, built without recursion: [[[…]]]. */
function nested(levels: number, leaf: unknown = 1): unknown {
  let v: unknown = leaf;
  for (let i = 0; i < levels; i++) v = [v];
  return v;
}

function refusal(fn: () => unknown): { code: string; message: string } {
  try {
    fn();
  } catch (err) {
    if (isEngineError(err)) return { code: err.code, message: err.message };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('the JSON depth limit', () => {
  it('is 64 levels, and LIMITS names it', () => {
    expect(MAX_JSON_DEPTH).toBe(64);
    expect(LIMITS.jsonDepth).toBe(MAX_JSON_DEPTH);
  });

  it('refuses 100,000 levels of [ without overflowing the stack, by text and by value', () => {
    const text = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(textNestsDeeper(text)).toBe(true);
    expect(nestsDeeper(JSON.parse(text))).toBe(true);
    expect(nestsDeeper(nested(100_000))).toBe(true);
    expect(() => JSON.stringify(nested(100_000))).toThrow(RangeError); // what the check stands in front of
    const r = refusal(() => assertTextDepth(text, 'card'));
    expect(r).toEqual({ code: 'VALIDATION_FAILED', message: 'card nests deeper than 64 levels (JSON input may nest at most 64)' });
  });

  it('counts objects and arrays, not brackets inside strings', () => {
    expect(nestsDeeper(nested(64))).toBe(false);
    expect(nestsDeeper(nested(65))).toBe(true);
    expect(textNestsDeeper(JSON.stringify(nested(64)))).toBe(false);
    expect(textNestsDeeper(JSON.stringify(nested(65)))).toBe(true);
    expect(textNestsDeeper(JSON.stringify({ a: { b: [1] } }), 3)).toBe(false);
    expect(textNestsDeeper(JSON.stringify({ a: { b: [[1]] } }), 3)).toBe(true);
    const brackets = JSON.stringify({ s: '['.repeat(1000), t: '"[[[[\\"{{{{', u: '\\' });
    expect(textNestsDeeper(brackets, 1)).toBe(false);
    expect(nestsDeeper(JSON.parse(brackets), 1)).toBe(false);
    for (const scalar of [null, 1, 'x', true, undefined]) expect(nestsDeeper(scalar, 0)).toBe(false);
    expect(nestsDeeper({}, 0)).toBe(true);
  });

  it('walks values built in code: shared members cost little, a cycle is too deep', () => {
    let shared: unknown[] = [];
    for (let i = 0; i < 40; i++) shared = [shared, shared]; // 2^40 paths, 41 levels
    expect(nestsDeeper(shared)).toBe(false);
    expect(nestsDeeper([shared], 40)).toBe(true);
    const loop: Record<string, unknown> = { a: 1 };
    loop.self = { back: loop };
    expect(nestsDeeper(loop)).toBe(true);
  });

  it('TaskManager refuses a card or a result nested too deep with one VALIDATION_FAILED line, and writes nothing', async () => {
    const tm = freshManager();
    const deep = { goal: 'g', x: nested(100_000) };
    await expect(tm.createTask({ title: 't', card: deep }, agent('a'))).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      message: 'create: card: nests deeper than 64 levels (JSON input may nest at most 64)',
    });
    await expect(tm.createTasks([{ title: 't', card: deep }], agent('a'))).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    expect((await tm.stats()).lastEventId).toBe(0);

    const { task } = await tm.createTask({ title: 't', card: { goal: 'g', x: nested(63) } }, agent('a')); // 64 with the card itself
    const { claimToken } = (await tm.claimTask({ agent: 'w', start: true }))!;
    const before = (await tm.stats()).lastEventId;
    await expect(tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w'), claimToken, result: nested(65) })).rejects.toMatchObject({
      code: 'VALIDATION_FAILED',
      message: 'transition: result: nests deeper than 64 levels (JSON input may nest at most 64)',
    });
    expect((await tm.stats()).lastEventId).toBe(before);
    expect((await tm.transitionTask({ taskId: task.id, to: 'review', actor: agent('w'), claimToken, result: nested(64) })).state).toBe('review');
  });

  it('a tool refuses arguments nested too deep before zod walks them', () => {
    const recursive: z.ZodType<unknown> = z.lazy(() => z.union([z.number(), z.array(recursive)]));
    const tool = defineTool({ name: 'deep_tool', description: 'd', kind: 'read', args: z.object({ v: recursive }), execute: async () => ({}) });
    expect(tool.parse({ v: nested(63) })).toBeTruthy();
    expect(refusal(() => tool.parse({ v: nested(100_000) }))).toEqual({
      code: 'VALIDATION_FAILED',
      message: 'deep_tool: arguments nests deeper than 64 levels (JSON input may nest at most 64)',
    });
  });
});
