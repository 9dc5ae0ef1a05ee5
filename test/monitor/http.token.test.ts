/** TASKLOOP_TOKENS: the identities tokens bind, and the names they may not take. */
import { describe, expect, it } from 'vitest';
import { OPERATOR, isEngineError } from '../../src/engine/index.js';
import { tokensFromEnv } from '../../src/monitor/http/auth.js';

describe('TASKLOOP_TOKENS identities', () => {
  const table = (id: string, role: string) => ({ TASKLOOP_TOKENS: JSON.stringify({ 'secret-token-0123456789': { id, role } }) });
  const codeOf = (fn: () => unknown): { code: string; message: string } => {
    try {
      fn();
    } catch (err) {
      return { code: isEngineError(err) ? err.code : 'not an engine error', message: (err as Error).message };
    }
    return { code: 'accepted', message: '' };
  };

  it('refuses an agent or reviewer named as the operator or a system actor (any case), and an operator named as a system actor, with RESERVED_NAME', () => {
    for (const [id, role] of [['operator', 'agent'], ['OPERATOR', 'agent'], [' Operator ', 'agent'], ['Sweeper', 'agent'], ['system', 'agent'], ['scheduler', 'reviewer'], ['reviewer', 'reviewer'], ['operator', 'reviewer'], ['sweeper', 'operator'], ['Acceptance', 'operator']] as const) {
      const refused = codeOf(() => tokensFromEnv(table(id, role)));
      expect(refused.code, `${role} ${id}`).toBe('RESERVED_NAME');
      expect(refused.message).toMatch(/^TASKLOOP_TOKENS entry 1: /);
      expect(refused.message).not.toContain('secret-token');
      expect(refused.message).not.toContain('\n');
    }
    expect(tokensFromEnv(table('operator', 'operator')).get('secret-token-0123456789')).toEqual(OPERATOR);
    expect(tokensFromEnv(table('alice', 'operator')).get('secret-token-0123456789')).toEqual({ id: 'alice', role: 'operator' });
    // A malformed entry is named by its place, never by its token.
    expect(codeOf(() => tokensFromEnv(table('x', 'system'))).message).toMatch(/^TASKLOOP_TOKENS entry 1: role: /);
  });

  it('binds a reviewer token with role reviewer', () => {
    const tokens = tokensFromEnv(table('carol', 'reviewer'));
    expect(tokens.get('secret-token-0123456789')).toEqual({ id: 'carol', role: 'reviewer' });
  });
});
