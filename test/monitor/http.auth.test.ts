import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { isLoopback, tokensFromEnv } from '../../src/monitor/http/auth.js';
import { MAX_SESSIONS_PER_ACTOR, SESSION_MS, createSessions } from '../../src/monitor/http/session.js';
import { boardRoutes } from '../../src/monitor/board/board.js';
import { api, bearer, card, openStream, startServer } from './http-helpers.js';

const TOKEN = 'operator-token-0123456789';

describe('authentication', () => {
  it('refuses to start without a token: off loopback, or on loopback with no token file to keep a generated one in', async () => {
    await expect(startServer({ tokens: new Map(), tokenFile: undefined })).rejects.toThrow(/no token is configured: set TASKLOOP_TOKEN/);
    await expect(startServer({ host: '0.0.0.0', tokens: new Map() })).rejects.toThrow(/refusing to serve on 0\.0\.0\.0/);
  });

  it('on loopback every endpoint answers 401 without a credential, and the bearer of TASKLOOP_TOKEN acts as the operator', async () => {
    const { url } = await startServer({ tokens: new Map([[TOKEN, OPERATOR]]) });
    for (const [method, path] of [['GET', '/api/health'], ['GET', '/api/tasks'], ['POST', '/api/tasks'], ['POST', '/api/tasks/stop-all'], ['GET', '/api/approvals'], ['GET', '/api/nothing']] as const) {
      const r = await api(url, method, path);
      expect(r.status, `${method} ${path}`).toBe(401);
      expect(r.json.error.code).toBe('UNAUTHORIZED');
      expect(r.headers.get('www-authenticate')).toMatch(/^Bearer/);
    }
    expect((await openStream(`${url}/api/events`)).status).toBe(401);
    expect((await api(url, 'GET', '/api/health', undefined, bearer('wrong-token-0123456789'))).status).toBe(401);
    expect((await api(url, 'GET', '/api/health', undefined, { authorization: `Basic ${TOKEN}` })).status).toBe(401);

    const created = await api(url, 'POST', '/api/tasks', { title: 't', card: card() }, bearer(TOKEN));
    expect(created.status).toBe(201);
    expect(created.json.creator).toBe('operator');
    const stream = await openStream(`${url}/api/tasks/${created.json.id}/events`, bearer(TOKEN));
    await stream.ended;
    expect(stream.events.at(-1)!.data.data.to).toBe('completed');
  });

  it('bound to 0.0.0.0 it requires the token even from 127.0.0.1', async () => {
    const { server } = await startServer({ host: '0.0.0.0', tokens: new Map([[TOKEN, OPERATOR]]) });
    const local = `http://127.0.0.1:${server.port}`;
    expect((await api(local, 'GET', '/api/health')).status).toBe(401);
    expect((await api(local, 'GET', '/api/health', undefined, bearer(TOKEN))).json.status).toBe('ok');
  });

  it('a token names its own identity, and the engine rules apply to it', async () => {
    const alice = 'alice-token-0123456789';
    const bob = 'bob-token-0123456789ab';
    const tokens = tokensFromEnv({ TASKLOOP_TOKENS: JSON.stringify({ [alice]: { id: 'alice', role: 'agent' }, [bob]: { id: 'bob', role: 'agent' } }) });
    const { url } = await startServer({ tokens });
    expect((await api(url, 'POST', '/api/tasks', { title: 'nobody', attach: false })).status).toBe(401);
    expect((await api(url, 'GET', '/api/health', undefined, bearer('not-a-token-0123456789'))).status).toBe(401);

    const mine = (await api(url, 'POST', '/api/tasks', { title: 'mine', card: card() }, bearer(alice))).json;
    expect(mine.creator).toBe('alice');
    const stranger = await openStream(`${url}/api/tasks/${mine.id}/events`, bearer(bob));
    expect(stranger.status).toBe(403);
    expect(stranger.error.error.code).toBe('FORBIDDEN');
    const cancel = await api(url, 'POST', `/api/tasks/${mine.id}/stop`, {}, bearer(bob));
    expect(cancel.status).toBe(403);
    expect(cancel.json.error.code).toBe('FORBIDDEN');
    expect((await api(url, 'POST', `/api/tasks/${mine.id}/stop`, {}, bearer(alice))).json).toEqual({ state: 'stopped', tasks: [mine.id] });
  });

  it('refuses web pages of other origins and rebinding host names', async () => {
    const { url, op, server } = await startServer();
    // Refused for the origin even with the operator's credential.
    const evil = await api(op, 'POST', '/api/tasks/stop-all', {}, { origin: 'http://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.json.error.code).toBe('ORIGIN_REFUSED');
    expect((await api(op, 'GET', '/api/tasks', undefined, { 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect((await api(op, 'GET', '/api/tasks', undefined, { origin: url })).status).toBe(200);

    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/api/health', headers: { ...op.headers, host: `rebound.example:${server.port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    expect(status).toBe(403);
  });

  it('reads TASKLOOP_TOKEN and TASKLOOP_TOKENS, and refuses malformed ones', () => {
    expect(tokensFromEnv({})).toEqual(new Map());
    expect(tokensFromEnv({ TASKLOOP_TOKEN: TOKEN }).get(TOKEN)).toEqual(OPERATOR);
    expect(() => tokensFromEnv({ TASKLOOP_TOKEN: 'short' })).toThrow(/at least 16/);
    expect(() => tokensFromEnv({ TASKLOOP_TOKENS: '{' })).toThrow(/not valid JSON/);
    expect(() => tokensFromEnv({ TASKLOOP_TOKENS: JSON.stringify({ [TOKEN]: { id: 'x', role: 'system' } }) })).toThrow(/role/);
    expect(['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '10.0.0.1', '::', 'example.com', '128.0.0.1'].some(isLoopback)).toBe(false);
  });
});

describe('browser sessions (how the board carries a credential)', () => {
  const session = (res: { headers: Headers }) => /taskloop_session=([^;]*)/.exec(res.headers.get('set-cookie') ?? '')?.[1];

  it('the board page needs no token; signing in with one sets an HttpOnly cookie that the API and the event stream accept', async () => {
    const alice = 'alice-token-0123456789';
    const tokens = new Map([[TOKEN, OPERATOR], [alice, { id: 'alice', role: 'agent' as const }]]);
    const { url } = await startServer({ tokens, extraRoutes: boardRoutes() });
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('id="signin"');
    expect((await api(url, 'GET', '/api/session')).status).toBe(401);

    const wrong = await api(url, 'POST', '/api/session', { token: 'not-a-token-0123456789' });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe('UNAUTHORIZED');
    expect(wrong.headers.get('set-cookie')).toBeNull();
    expect((await api(url, 'POST', '/api/session', { nope: 1 })).json.error.code).toBe('VALIDATION_FAILED');

    const signedIn = await api(url, 'POST', '/api/session', { token: alice });
    expect(signedIn.status).toBe(200);
    expect(signedIn.json).toEqual({ actor: { id: 'alice', role: 'agent' }, expires_in_s: 43200, session_key: expect.stringMatching(/^[\w-]{43}$/) });
    expect(signedIn.headers.get('set-cookie')).toMatch(/^taskloop_session=[\w-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=43200$/);
    const key = signedIn.json.session_key as string;
    const stolen = { cookie: `theme=dark; taskloop_session=${session(signedIn)}` };
    const cookie = { ...stolen, 'x-taskloop-session-key': key };

    expect((await api(url, 'GET', '/api/session', undefined, cookie)).json).toEqual({ actor: { id: 'alice', role: 'agent' } });
    const created = await api(url, 'POST', '/api/tasks', { title: 'from the board', card: card(), attach: false }, cookie);
    expect(created.status).toBe(201);
    expect(created.json.creator).toBe('alice');
    // An agent follows the tasks it may read; the whole log is for people (README: Authority).
    expect((await openStream(`${url}/api/events?after=0`, cookie)).status).toBe(403);
    // The stream, where a browser sets no header, takes the key in its URL (and the route never sees it).
    const events = await openStream(`${url}/api/events?task_id=${created.json.id}&after=0&session_key=${key}`, stolen);
    expect(events.status).toBe(200);
    await events.next((e) => e.data.type === 'task.created', 'the created event');
    events.close();

    // Another site cannot sign a browser in, nor use its cookie.
    expect((await api(url, 'POST', '/api/session', { token: alice }, { origin: 'http://evil.example' })).status).toBe(403);
    expect((await api(url, 'GET', '/api/tasks', undefined, { ...cookie, 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    // A made-up session is no session.
    expect((await api(url, 'GET', '/api/tasks', undefined, { cookie: 'taskloop_session=made-up' })).status).toBe(401);
    // The cookie alone is no credential: a browser sends it to every port of this host, so a
    // page another local user serves on another loopback port receives it (session.ts). Replayed
    // without its key, with another session's key, or with a key of the wrong length: refused.
    for (const headers of [stolen, { ...stolen, 'x-taskloop-session-key': 'x'.repeat(43) }, { ...stolen, 'x-taskloop-session-key': `${key}x` }]) {
      for (const [method, path, body] of [['GET', '/api/session'], ['POST', '/api/tasks', { title: 'as alice', attach: false }], ['POST', '/api/tasks/stop-all', {}]] as const) {
        const r = await api(url, method, path, body, headers);
        expect(r.status, `${method} ${path}`).toBe(401);
        expect(r.json.error.code).toBe('UNAUTHORIZED');
      }
      expect((await openStream(`${url}/api/events?task_id=${created.json.id}&after=0`, headers)).status).toBe(401);
    }
    const other = await api(url, 'POST', '/api/session', { token: alice });
    expect((await api(url, 'GET', '/api/session', undefined, { ...stolen, 'x-taskloop-session-key': other.json.session_key })).status).toBe(401);
    expect((await api(url, 'GET', `/api/session?session_key=${key}`, undefined, stolen)).status).toBe(200);
    // Only a GET takes the key in its URL (what a browser cannot send a header with): a write does not.
    expect((await api(url, 'POST', `/api/tasks?session_key=${key}`, { title: 'key in the URL', attach: false }, stolen)).status).toBe(401);

    const out = await api(url, 'DELETE', '/api/session', undefined, cookie);
    expect(out.json).toEqual({ signed_out: true });
    expect(out.headers.get('set-cookie')).toMatch(/^taskloop_session=; .*Max-Age=0$/);
    expect((await api(url, 'GET', '/api/tasks', undefined, cookie)).status).toBe(401);
  });

  it('sessions expire after 12 hours and the oldest give way past a thousand', () => {
    let now = 0;
    const sessions = createSessions(() => now);
    const first = sessions.open(OPERATOR);
    expect(sessions.actorOf(first)).toEqual(OPERATOR);
    now = SESSION_MS - 1;
    expect(sessions.actorOf(first)).toEqual(OPERATOR);
    now = SESSION_MS;
    expect(sessions.actorOf(first)).toBeUndefined();
    const who = (i: number) => ({ id: `agent${i}`, role: 'agent' as const });
    const ids = Array.from({ length: 1001 }, (_, i) => sessions.open(who(i)));
    expect(sessions.actorOf(ids[0]!)).toBeUndefined();
    expect(sessions.actorOf(ids[1]!)).toEqual(who(1));
    expect(sessions.actorOf(ids[1000]!)).toEqual(who(1000));
    // One identity gives way to itself, never to others, past MAX_SESSIONS_PER_ACTOR.
    const mine = Array.from({ length: MAX_SESSIONS_PER_ACTOR + 1 }, () => sessions.open(OPERATOR));
    expect(sessions.actorOf(mine[0]!)).toBeUndefined();
    expect(sessions.actorOf(mine[1]!)).toEqual(OPERATOR);
    expect(sessions.actorOf(ids[1000]!)).toEqual(who(1000));
  });
});
