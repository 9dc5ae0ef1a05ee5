import { describe, expect, it } from 'vitest';
import { builtInTools } from '../../src/tools/builtin.js';
import { toOpenAiFunction } from '../../src/tools/registry.js';
import { taskCreate } from '../../src/tools/task-tools.js';
import { spawnCli } from '../cli/helpers.js';
import { join } from 'node:path';
import { ROOT, freshManager } from '../helpers.js';

type Schema = Record<string, unknown>;

/**
 * OpenAI's rules for strict function calling ("Supported schemas" of Structured Outputs): the
 * root is an object; every object lists all its properties as required and sets
 * additionalProperties false; every schema has a type (or anyOf/enum/const); no `default`;
 * only the supported keywords; nesting at most 10 levels.
 */
const SUPPORTED = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'anyOf', 'description',
  'pattern', 'format', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf', 'minItems', 'maxItems', '$defs', '$ref',
]);

function strictProblems(s: Schema, at = '$', depth = 0): string[] {
  const problems: string[] = [];
  if (depth > 10) problems.push(`${at}: nested deeper than 10 levels`);
  for (const key of Object.keys(s)) if (!SUPPORTED.has(key)) problems.push(`${at}: keyword ${key} is not supported`);
  if (s.type === undefined && s.anyOf === undefined && s.enum === undefined && s.const === undefined && s.$ref === undefined) problems.push(`${at}: no type`);
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if (types.includes('object')) {
    const props = (s.properties ?? {}) as Record<string, Schema>;
    if (s.additionalProperties !== false) problems.push(`${at}: additionalProperties must be false`);
    const required = new Set((s.required ?? []) as string[]);
    for (const name of Object.keys(props)) if (!required.has(name)) problems.push(`${at}.${name}: not required`);
    for (const [name, prop] of Object.entries(props)) problems.push(...strictProblems(prop, `${at}.${name}`, depth + 1));
  }
  if (s.items !== undefined) problems.push(...strictProblems(s.items as Schema, `${at}[]`, depth + 1));
  for (const [i, x] of ((s.anyOf ?? []) as Schema[]).entries()) problems.push(...strictProblems(x, `${at}|${i}`, depth + 1));
  return problems;
}

describe('tool schemas for strict function calling', () => {
  it('every built-in tool passes OpenAI’s strict-mode rules in its --strict form (and the plain form does not)', () => {
    const tools = builtInTools();
    for (const tool of tools) {
      const fn = toOpenAiFunction(tool, { strict: true }).function;
      expect(fn.strict).toBe(true);
      expect(strictProblems(fn.parameters), tool.name).toEqual([]);
    }
    const plainPass = tools.filter((t) => strictProblems(toOpenAiFunction(t).function.parameters).length === 0);
    expect(plainPass.length).toBeLessThan(tools.length);
  });

  it('a strict-mode call (every key, null for the optional ones, the card as a JSON string) means the same as the plain one', () => {
    const card = { goal: 'summarise', allowed_tools: ['noop'] };
    const strict = taskCreate.parse({ title: 't', card: JSON.stringify(card), priority: null, depends_on: null, idempotency_key: null, queue: null, for_agent: null, requires: null });
    expect(strict).toEqual(taskCreate.parse({ title: 't', card }));
    // null stays refused where an argument is required, and a card string must be a JSON object.
    expect(() => taskCreate.parse({ title: null })).toThrow(/VALIDATION_FAILED|title/);
    expect(() => taskCreate.parse({ title: 't', card: 'not json' })).toThrow(/a string here must be a JSON-encoded object/);
    expect(() => taskCreate.parse({ title: 't', card: '[1]' })).toThrow(/card/);
    expect(() => taskCreate.parse({ title: 't', card: `{"a":${'['.repeat(100)}${']'.repeat(100)}}` })).toThrow(/nests deeper than 64 levels/);
  });

  it('taskloop tools --format openai --strict prints them', async () => {
    const tm = freshManager();
    const r = await spawnCli(['--db', tm.path, 'tools', '--format', 'openai', '--strict']);
    expect(r.code, r.stderr).toBe(0);
    const fns = JSON.parse(r.stdout) as Array<{ function: { name: string; strict: boolean; parameters: Schema } }>;
    expect(fns.map((f) => f.function.name)).toContain('task_create');
    for (const f of fns) expect(strictProblems(f.function.parameters), f.function.name).toEqual([]);
    expect((await spawnCli(['--db', tm.path, 'tools', '--strict'])).code).toBe(2);
  });

  it('taskloop tools --tools MODULE lists a module’s tools beside the built-in ones; a module that fails to load is a usage error', async () => {
    const tm = freshManager();
    const listed = await spawnCli(['--db', tm.path, '--json', 'tools', '--tools', join(ROOT, 'test/fixtures/test-tools.mjs')]);
    expect(listed.code, listed.stderr).toBe(0);
    const names = (JSON.parse(listed.stdout) as Array<{ name: string }>).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['task_create', 'kv_set', 'log_append']));
    const broken = await spawnCli(['--db', tm.path, 'tools', '--tools', './no-such-module.mjs']);
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/^taskloop: tool module \.\/no-such-module\.mjs failed to load/);
  });
});
