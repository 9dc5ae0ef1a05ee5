/**
 * No credential, no authority (issue 10, item 4): a loopback server with no configured token
 * generates one into an owner-only file, answers 401 to every request without a credential,
 * and signs a browser in through a one-time code.
 */
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OPERATOR, isEngineError } from '../../src/engine/index.js';
import { tokensFromEnv } from '../../src/monitor/http/auth.js';
import { SIGNIN_CODE_MS, createSignInCodes } from '../../src/monitor/http/signin-codes.js';
import { loadOrCreateTokenFile, tokenFileFor } from '../../src/monitor/http/token-file.js';
import { boardRoutes } from '../../src/monitor/board/board.js';
import { tempDir } from '../helpers.js';
import { api, bearer, card, openStream, startServer } from './http-helpers.js';

const mode = (path: string) => statSync(path).mode & 0o777;
const sessionOf = (res: { headers: Headers }) => /taskloop_session=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
const isRoot = process.getuid?.() === 0;

describe('no credential, no authority on loopback', () => {
  it('a loopback server with no token configured answers 401 UNAUTHORIZED on every API route to a request without a credential', async () => {
    const { url, op } = await startServer({ extraRoutes: boardRoutes() });
    const id = (await api(op, 'POST', '/api/tasks', { title: 'existing', attach: false })).json.id as number;
    const routes: Array<[string, string]> = [
      ['GET', '/api/health'],
      ['GET', '/api/tasks'],
      ['POST', '/api/tasks'],
      ['GET', `/api/tasks/${id}`],
      ['POST', `/api/tasks/${id}/cancel`],
      ['POST', `/api/tasks/${id}/stop`],
      ['POST', `/api/tasks/${id}/pause`],
      ['POST', `/api/tasks/${id}/resume`],
      ['POST', '/api/tasks/stop-all'],
      ['GET', '/api/runs/1'],
      ['GET', '/api/runs/1/screen'],
      ['GET', '/api/approvals'],
      ['POST', '/api/approvals/1/approve'],
      ['POST', '/api/approvals/1/reject'],
      ['GET', '/api/session'],
      ['GET', '/api/nothing'],
    ];
    for (const [method, path] of routes) {
      const r = await api(url, method, path, method === 'POST' ? {} : undefined);
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.json.error.code, `${method} ${path}`).toBe('UNAUTHORIZED');
    }
    for (const path of [`/api/tasks/${id}/events`, '/api/events?after=0']) {
      const stream = await openStream(`${url}${path}`);
      expect(stream.status, path).toBe(401);
      expect(stream.error.error.code).toBe('UNAUTHORIZED');
    }
    // Nothing moved: the task is as the operator left it.
    expect((await api(op, 'GET', `/api/tasks/${id}`)).json).toMatchObject({ state: 'pending', events: [{ type: 'task.created' }] });
    // The board page and sign-in stay reachable without credentials.
    expect((await fetch(`${url}/`)).status).toBe(200);
    expect((await api(url, 'POST', '/api/session', { token: 'not-a-token-0123456789' })).json.error.code).toBe('UNAUTHORIZED');
  });

  it('another local user cannot run a command as the server: the card with an acceptance command is refused with 401, no task is written, the marker never appears', async () => {
    const dir = tempDir();
    const marker = join(dir, 'pwned');
    const { url, op, db } = await startServer();
    const attack = { title: 'harmless', card: card({ acceptance: { checks: [{ id: 'x', command: ['touch', marker] }] } }) };

    const created = await api(url, 'POST', '/api/tasks', attack);
    expect(created.status).toBe(401);
    expect(created.json.error.code).toBe('UNAUTHORIZED');
    // The task id the attacker would guess next: its stream is refused before it is looked up.
    const stream = await openStream(`${url}/api/tasks/1/events`);
    expect(stream.status).toBe(401);
    expect(db.prepare('SELECT count(*) AS n FROM tasks').get()).toEqual({ n: 0 });
    expect(db.prepare('SELECT count(*) AS n FROM task_events').get()).toEqual({ n: 0 });
    expect(existsSync(marker)).toBe(false);

    // The same card from the operator does run its command: the refusal above is what stopped it.
    const mine = await api(op, 'POST', '/api/tasks', attack);
    expect(mine.status).toBe(201);
    await (await openStream(`${url}/api/tasks/${mine.json.id}/events`, op.headers)).ended;
    expect(existsSync(marker)).toBe(true);
  });
});

describe('the generated operator token', () => {
  it('is made in <db>.http-token with mode 0600, works as the operator, and is reused by the next start', async () => {
    const path = join(tempDir(), 'tasks.db');
    const file = tokenFileFor(path);
    const first = await startServer({ path });
    expect(first.server.tokenFile).toBe(file);
    const st = lstatSync(file);
    expect(st.isFile()).toBe(true);
    expect(st.mode & 0o777).toBe(0o600);
    expect(st.uid).toBe(process.getuid!());
    const token = readFileSync(file, 'utf8').trim();
    expect(token).toMatch(/^[\w-]{43}$/);
    expect((await api(first.url, 'GET', '/api/session', undefined, bearer(token))).json).toEqual({ actor: { id: 'operator', role: 'operator' } });
    expect((await api(first.url, 'POST', '/api/tasks', { title: 'by the operator', attach: false }, bearer(token))).json.creator).toBe('operator');
    await first.server.close();

    const second = await startServer({ path });
    expect(second.server.tokenFile).toBe(file);
    expect(readFileSync(file, 'utf8').trim()).toBe(token);
    expect(mode(file)).toBe(0o600);
    expect((await api(second.url, 'GET', '/api/tasks', undefined, bearer(token))).status).toBe(200);
  });

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

  it('refuses a planted file: group- or world-readable, a symlink (even dangling), a FIFO, an empty one, and an unsafe folder', async () => {
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
    // A group's write on one's own folder is one's choice (umask 002); on another owner's (root's, as a
    // non-root user) it is not: the database's folder rule (test/engine/local-user.test.ts).
    chmodSync(shared, 0o775);
    expect(loadOrCreateTokenFile(join(shared, 'own-group.http-token')).token).toMatch(/^\S{16,}$/);
    rmSync(join(shared, 'own-group.http-token'));
    chmodSync(shared, 0o1777);
    expect(() => loadOrCreateTokenFile(join(shared, 'x.http-token'))).toThrow(/writable by others/);
    expect(existsSync(join(shared, 'x.http-token'))).toBe(false);

    // The server does not start on such a file, and leaves it as it was.
    const db = at('tasks.db');
    symlinkSync(at('real'), tokenFileFor(db));
    await expect(startServer({ path: db })).rejects.toThrow(/^refusing the token file .*tasks\.db\.http-token: it is a symbolic link/);
    expect(lstatSync(tokenFileFor(db)).isSymbolicLink()).toBe(true);
  });

  it.skipIf(!isRoot)('refuses a file another user owns, even with mode 0600', () => {
    const file = join(tempDir(), 'x.http-token');
    writeFileSync(file, 'a-token-of-someone-0123456789\n', { mode: 0o600 });
    chownSync(file, 65534, 65534);
    expect(() => loadOrCreateTokenFile(file)).toThrow(/belongs to another user \(uid 65534\)/);
  });
});

describe('one-time sign-in', () => {
  it('a code gives one session within its lifetime; a second use, an expired code and an unknown one are refused', async () => {
    let now = Date.UTC(2026, 0, 1);
    const { url, server } = await startServer({ now: () => now });
    const link = server.signInLink()!;
    expect(link).toMatch(new RegExp(`^${url}/\\?signin=[\\w-]{32}$`));
    const code = new URL(link).searchParams.get('signin')!;

    const signedIn = await api(url, 'POST', '/api/session', { code });
    expect(signedIn.status).toBe(200);
    expect(signedIn.json.actor).toEqual({ id: 'operator', role: 'operator' });
    const cookie = { cookie: `taskloop_session=${sessionOf(signedIn)}`, 'x-taskloop-session-key': signedIn.json.session_key as string };
    expect((await api(url, 'POST', '/api/tasks', { title: 'signed in by link', attach: false }, cookie)).json.creator).toBe('operator');

    const again = await api(url, 'POST', '/api/session', { code });
    expect(again.status).toBe(401);
    expect(again.json.error).toEqual({ code: 'UNAUTHORIZED', message: expect.stringMatching(/sign-in code is not valid/) });
    expect(again.headers.get('set-cookie')).toBeNull();

    const late = new URL(server.signInLink()!).searchParams.get('signin')!;
    now += SIGNIN_CODE_MS;
    expect((await api(url, 'POST', '/api/session', { code: late })).status).toBe(401);
    expect((await api(url, 'POST', '/api/session', { code: 'never-issued-0123456789abcdefghij' })).status).toBe(401);
    expect((await api(url, 'POST', '/api/session', { code: late, token: 'x'.repeat(20) })).json.error.code).toBe('VALIDATION_FAILED');
  });

  it('codes live five minutes, are used up by a redemption, and the link never carries the token', async () => {
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

    const { server, auth } = await startServer();
    expect(server.signInLink()).not.toContain(auth.authorization!.slice('Bearer '.length));
    // A server whose tokens map to no operator has no link to give.
    const agentsOnly = await startServer({ tokens: new Map([['agent-token-0123456789', { id: 'alice', role: 'agent' }]]) });
    expect(agentsOnly.server.signInLink()).toBeUndefined();
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

  it('binds a reviewer token with role reviewer', async () => {
    const tokens = tokensFromEnv(table('carol', 'reviewer'));
    expect(tokens.get('secret-token-0123456789')).toEqual({ id: 'carol', role: 'reviewer' });
    const { url } = await startServer({ tokens });
    expect((await api(url, 'GET', '/api/session', undefined, bearer('secret-token-0123456789'))).json).toEqual({ actor: { id: 'carol', role: 'reviewer' } });
  });
});
