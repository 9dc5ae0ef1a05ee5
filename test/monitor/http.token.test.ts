/**
 * No credential, no authority (issue 10, item 4): the owner-only token file, one-time
 * sign-in codes, and the identities TASKLOOP_TOKENS binds.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OPERATOR, isEngineError } from '../../src/engine/index.js';
import { tokensFromEnv } from '../../src/monitor/http/auth.js';
import { SIGNIN_CODE_MS, createSignInCodes } from '../../src/monitor/http/signin-codes.js';
import { loadOrCreateTokenFile } from '../../src/monitor/http/token-file.js';
import { tempDir } from '../helpers.js';

const mode = (path: string) => statSync(path).mode & 0o777;
const isRoot = process.getuid?.() === 0;

describe('the generated operator token', () => {
  it('is created owner-only even under umask 000, and the folder is left with no temporary file', () => {
    const dir = tempDir();
    const previous = process.umask(0);
    try {
      const made = loadOrCreateTokenFile(join(dir, 'x.db.http-token'));
      expect(made.created).toBe(true);
      expect(mode(made.path)).toBe(0o600);
    } finally {
      process.umask(previous);
    }
    expect(execFileSync('ls', ['-A', dir], { encoding: 'utf8' }).trim()).toBe('x.db.http-token');
  });

  it('refuses a planted file: group- or world-readable, a symlink (even dangling), a FIFO, an empty one, and an unsafe folder', () => {
    const dir = tempDir();
    const at = (name: string) => join(dir, name);
    const refused = (name: string) => () => loadOrCreateTokenFile(at(name));

    writeFileSync(at('group.http-token'), 'a-token-of-someone-0123456789\n', { mode: 0o640 });
    chmodSync(at('group.http-token'), 0o640);
    expect(refused('group.http-token')).toThrow(/refusing the token file .*group\.http-token: others may access it \(mode 0640\)/);
    writeFileSync(at('world.http-token'), 'a-token-of-someone-0123456789\n', { mode: 0o644 });
    chmodSync(at('world.http-token'), 0o644);
    expect(refused('world.http-token')).toThrow(/mode 0644/);

    writeFileSync(at('real'), 'a-token-of-someone-0123456789\n', { mode: 0o600 });
    symlinkSync(at('real'), at('link.http-token'));
    expect(refused('link.http-token')).toThrow(/symbolic link/);
    symlinkSync(at('nowhere'), at('dangling.http-token'));
    expect(refused('dangling.http-token')).toThrow(/symbolic link/);
    expect(existsSync(at('nowhere'))).toBe(false);

    execFileSync('mkfifo', [at('fifo.http-token')]);
    chmodSync(at('fifo.http-token'), 0o600);
    expect(refused('fifo.http-token')).toThrow(/not a regular file/);
    writeFileSync(at('empty.http-token'), '', { mode: 0o600 });
    expect(refused('empty.http-token')).toThrow(/does not hold one token/);

    const shared = join(dir, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o775);
    expect(() => loadOrCreateTokenFile(join(shared, 'x.http-token'))).toThrow(/folder .*shared is writable by its group \(mode 0775\)/);
    chmodSync(shared, 0o1777);
    expect(() => loadOrCreateTokenFile(join(shared, 'x.http-token'))).toThrow(/writable by others/);
    expect(existsSync(join(shared, 'x.http-token'))).toBe(false);

  });

  it.skipIf(!isRoot)('refuses a file another user owns, even with mode 0600', () => {
    const file = join(tempDir(), 'x.http-token');
    writeFileSync(file, 'a-token-of-someone-0123456789\n', { mode: 0o600 });
    chownSync(file, 65534, 65534);
    expect(() => loadOrCreateTokenFile(file)).toThrow(/belongs to another user \(uid 65534\)/);
  });
});

describe('one-time sign-in', () => {
  it('codes live five minutes and are used up by a redemption', () => {
    let now = 0;
    const codes = createSignInCodes(() => now);
    const a = codes.issue(OPERATOR);
    const b = codes.issue(OPERATOR);
    expect(a).not.toBe(b);
    now = SIGNIN_CODE_MS - 1;
    expect(codes.redeem(a)).toEqual(OPERATOR);
    expect(codes.redeem(a)).toBeUndefined();
    now = SIGNIN_CODE_MS;
    expect(codes.redeem(b)).toBeUndefined();
    expect(SIGNIN_CODE_MS).toBe(5 * 60 * 1000);

  });
});

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
