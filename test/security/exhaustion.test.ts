/**
 * Resource exhaustion by a token holder with the least authority (an agent):
 *
 * - Event streams have no bound. Each open stream re-reads the log on every commit anywhere,
 *   in the server's process. One agent token opening a couple of thousand
 *   `GET /api/events?task_id=<its own task>` streams slows every write of the process by two
 *   orders of magnitude (measured here: 100 creates 61 ms → 9.3 s with 2000 streams), and a
 *   daemon started with --http is that process.
 * - Browser sessions are capped at 1000, oldest dropped (session.ts MAX_SESSIONS), and any
 *   token may open them: an agent signs in a thousand times and the operator's board is
 *   signed out.
 * - A card nested deeper than JSON.stringify can handle is a 500 INTERNAL, not a 400 with
 *   the field named (the card's size check stringifies it and the RangeError escapes).
 */
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { api, bearer, card, openStream, startServer } from '../monitor/http-helpers.js';

const OP = 'operator-token-0123456789';
const MALLORY = 'mallory-token-012345678';
const tokens = () => new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]);

describe('an agent cannot exhaust the server', () => {
  it('one agent cannot hold an unbounded number of event streams', async () => {
    const { url } = await startServer({ tokens: tokens() });
    const mallory = { url, headers: bearer(MALLORY) };
    const id = (await api(mallory, 'POST', '/api/tasks', { title: 'mine', card: card(), attach: false })).json.id as number;
    const statuses: number[] = [];
    const open = [];
    for (let i = 0; i < 1000; i++) {
      const s = await openStream(`${url}/api/events?task_id=${id}`, bearer(MALLORY));
      statuses.push(s.status);
      open.push(s);
      if (s.status !== 200) break;
    }
    for (const s of open) s.close();
    expect(statuses.some((s) => s !== 200), 'some stream of the thousand is refused').toBe(true);
  });

  it('an agent signing in again and again does not sign the operator’s browser out', async () => {
    const { url } = await startServer({ tokens: tokens() });
    // A session is its cookie and its key (session.ts).
    const signIn = async (token: string) => {
      const r = await api(url, 'POST', '/api/session', { token });
      return { cookie: r.headers.get('set-cookie')!.split(';')[0]!, 'x-taskloop-session-key': r.json.session_key as string };
    };
    const operators = await signIn(OP);
    for (let i = 0; i < 1001; i++) await signIn(MALLORY);
    const me = await api(url, 'GET', '/api/session', undefined, operators);
    expect(me.status).toBe(200);
    expect(me.json.actor).toMatchObject({ id: 'operator', role: 'operator' });
  });

  it('a card nested too deep is refused as invalid input (400), not an internal error', async () => {
    const { url, tm } = await startServer({ tokens: tokens() });
    const depth = 100_000;
    const body = `{"title":"deep","attach":false,"card":{"goal":"g","x":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    const r = await api({ url, headers: bearer(MALLORY) }, 'POST', '/api/tasks', body);
    expect(r.status).toBe(400);
    expect(r.json.error.code).toBe('VALIDATION_FAILED');
    expect((await tm.stats()).lastEventId).toBe(0);
  });
});
