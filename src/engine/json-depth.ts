/**
 * How deep JSON input may nest. Everything that walks a value by recursion — JSON.stringify,
 * zod, a fingerprint's canonical form — takes one stack frame per level and overflows near
 * 5,000 levels, which a 10 KB body reaches. V8's JSON.parse is iterative and survives any
 * depth, so untrusted text may be parsed first; what must come first is this check, which is
 * iterative too, before anything recursive touches the value.
 *
 * Depth counts objects and arrays: a scalar nests 0 levels, `{}` and `[1]` 1, `{"a": [1]}` 2.
 */
import { EngineError } from './errors.js';

/** The deepest any JSON input may nest: cards, results, tool arguments, bodies, files, MCP params. */
export const MAX_JSON_DEPTH = 64;

/** The refusal's text, one line naming the limit: "`what` nests deeper than 64 levels (…)". */
export function depthMessage(limit = MAX_JSON_DEPTH): string {
  return `nests deeper than ${limit} levels (JSON input may nest at most ${limit})`;
}

/**
 * Whether JSON `text` nests deeper than `limit`: one linear pass counting brackets outside
 * strings, stopping at the first level over. It is exact for valid JSON; text that is not
 * JSON may be misjudged, and is then for JSON.parse to refuse.
 */
export function textNestsDeeper(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character (\" does not end the string)
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

function flat(node: object): boolean {
  const members: unknown[] = Array.isArray(node) ? node : Object.values(node);
  for (let i = 0; i < members.length; i++) {
    const m = members[i];
    if (typeof m === 'object' && m !== null) return false;
  }
  return true;
}

/**
 * Whether `value` nests deeper than `limit`, by an explicit stack (no recursion), stopping at
 * the first level over. Any non-null object counts as a level and its own enumerable values
 * as its members. Values built in code may share or loop: a member met again is walked again
 * only when met deeper than before, so shared members cost at most `limit` walks each and a
 * cycle is too deep.
 */
export function nestsDeeper(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  if (typeof value !== 'object' || value === null) return false;
  // The common case on hot paths (tool arguments, results): one level of plain values.
  if (limit >= 1 && flat(value)) return false;
  const seenAt = new Map<object, number>();
  const nodes: object[] = [value];
  const depths: number[] = [1];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > limit) return true;
    const before = seenAt.get(node);
    if (before !== undefined && before >= depth) continue;
    seenAt.set(node, depth);
    const members: unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (let i = 0; i < members.length; i++) {
      const m = members[i];
      if (typeof m === 'object' && m !== null) {
        if (depth + 1 > limit) return true;
        nodes.push(m);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** Throws VALIDATION_FAILED, "`what` nests deeper than …", when JSON `text` is too deep to parse safely. */
export function assertTextDepth(text: string, what: string, limit = MAX_JSON_DEPTH): void {
  if (textNestsDeeper(text, limit)) throw new EngineError('VALIDATION_FAILED', `${what} ${depthMessage(limit)}`, { limit });
}

/** Throws VALIDATION_FAILED, "`what` nests deeper than …", when `value` is too deep to hand to zod or JSON.stringify. */
export function assertDepth(value: unknown, what: string, limit = MAX_JSON_DEPTH): void {
  if (nestsDeeper(value, limit)) throw new EngineError('VALIDATION_FAILED', `${what} ${depthMessage(limit)}`, { limit });
}
