/** What a claimer's capabilities make of its pick of the tasks that require some (claim-needs.ts). */
import { describe, expect, it } from 'vitest';
import { MAX_LOOKED_UP, claimNeeds, requirementSet } from '../../src/engine/claim-needs.js';

describe('claimNeeds', () => {
  it('a requirement list is kept as one text, sorted and each once, whatever order the creator gave', () => {
    expect(requirementSet(['b', 'a', 'b'])).toBe('["a","b"]');
    expect(requirementSet([])).toBeNull();
    expect(requirementSet(undefined)).toBeNull();
  });

  it('a claimer looks up every non-empty subset of what it offers, each as the store keeps it', () => {
    expect(claimNeeds(undefined)).toEqual({ shape: 0, param: '[]' });
    expect(claimNeeds([])).toEqual({ shape: 0, param: '[]' });
    const needs = claimNeeds(['c', 'a', 'b', 'a']);
    expect(needs.shape).toBe(7);
    expect((JSON.parse(needs.param) as string[]).sort()).toEqual(
      [['a'], ['b'], ['c'], ['a', 'b'], ['a', 'c'], ['b', 'c'], ['a', 'b', 'c']].map((s) => requirementSet(s)).sort(),
    );
  });

  it(`past ${MAX_LOOKED_UP} capabilities it walks, with what it offers`, () => {
    const caps = ['i', 'h', 'g', 'f', 'e', 'd', 'c', 'b', 'a'];
    expect(caps.length).toBe(MAX_LOOKED_UP + 1);
    const eight = claimNeeds(caps.slice(0, MAX_LOOKED_UP));
    expect(eight.shape).toBe(2 ** MAX_LOOKED_UP - 1);
    expect(new Set(JSON.parse(eight.param) as string[]).size).toBe(255);
    expect(claimNeeds(caps)).toEqual({ shape: 'walk', param: '["a","b","c","d","e","f","g","h","i"]' });
  });

  it('a list changed in place after a claim is read again (not the answer kept for its first contents)', () => {
    const caps = ['a'];
    expect(claimNeeds(caps).shape).toBe(1);
    caps.push('b');
    expect(claimNeeds(caps).shape).toBe(3);
  });
});
