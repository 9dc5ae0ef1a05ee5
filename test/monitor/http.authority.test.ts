import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { api, bearer, card, openStream, startServer } from './http-helpers.js';

const OP = 'operator-token-0123456789';
const CLAUDE = 'claude-token-0123456789a';
const MALLORY = 'mallory-token-012345678';
const RITA = 'rita-token-0123456789abc';

function tokens() {
  return new Map([
    [OP, OPERATOR],
    [CLAUDE, { id: 'claude', role: 'agent' as const }],
    [MALLORY, { id: 'mallory', role: 'agent' as const }],
    [RITA, { id: 'rita', role: 'reviewer' as const }],
  ]);
}

describe('authority over HTTP', () => {
  it('an agent that created a high-risk task cannot approve its own call; a reviewer can, and the log says who', async () => {
    const { url, tm } = await startServer({ tokens: tokens() });
    const tickets = ticketStoreFor(tm.store);
    await tickets.seed();
    const claude = { url, headers: bearer(CLAUDE) };
    const created = await api(claude, 'POST', '/api/tasks', { title: 'page on-call', card: ticketCard('T-1024') });
    expect(created.status).toBe(201);
    const stream = await openStream(`${url}/api/tasks/${created.json.id}/events`, bearer(CLAUDE));
    const requested = await stream.next((e) => e.event === 'approval.requested', 'the approval request');
    const approvalId = requested.data.data.approval_id as number;
    await stream.next((e) => e.event === 'task.transitioned' && e.data.data.to === 'waiting', 'the task to wait');

    for (const token of [CLAUDE, MALLORY]) {
      const self = await api(url, 'POST', `/api/approvals/${approvalId}/approve`, {}, bearer(token));
      expect(self.status).toBe(403);
      expect(self.json.error.code).toBe('FORBIDDEN');
    }
    expect(await tickets.get('T-1024')).toMatchObject({ notified: false });
    expect((await api({ url, headers: bearer(OP) }, 'GET', `/api/approvals?state=all`)).json.approvals[0]).toMatchObject({ id: approvalId, state: 'pending' });

    const decided = await api(url, 'POST', `/api/approvals/${approvalId}/approve`, { reason: 'four eyes' }, bearer(RITA));
    expect(decided.status).toBe(200);
    expect(decided.json).toMatchObject({ state: 'approved', decided_by: 'rita' });
    await stream.ended;
    expect(await tickets.get('T-1024')).toMatchObject({ notified: true });
    const decision = (await tm.getTask(created.json.id)).events.find((e) => e.type === 'approval.decided')!;
    expect(decision).toMatchObject({ actor: 'rita', actorRole: 'reviewer' });
  });

  it('an agent reads only the tasks it created, holds or may claim; the whole log and the approvals are for people', async () => {
    const { url } = await startServer({ tokens: tokens() });
    const op = { url, headers: bearer(OP) };
    const claude = { url, headers: bearer(CLAUDE) };
    const mallory = { url, headers: bearer(MALLORY) };
    const secret = (await api(claude, 'POST', '/api/tasks', { title: 'for claude', card: card(), for_agent: 'claude', attach: false })).json.id as number;
    const open = (await api(claude, 'POST', '/api/tasks', { title: 'anyone', card: card(), attach: false })).json.id as number;
    const ops = (await api(op, 'POST', '/api/tasks', { title: 'operator’s', card: card(), for_agent: 'worker', attach: false })).json.id as number;

    expect((await api(mallory, 'GET', '/api/tasks')).json.tasks.map((t: { id: number }) => t.id)).toEqual([open]);
    expect((await api(claude, 'GET', '/api/tasks')).json.tasks.map((t: { id: number }) => t.id)).toEqual([secret, open]);
    expect((await api(op, 'GET', '/api/tasks')).json.tasks.map((t: { id: number }) => t.id)).toEqual([secret, open, ops]);
    for (const id of [secret, ops]) {
      const r = await api(mallory, 'GET', `/api/tasks/${id}`);
      expect(r.status, `task ${id}`).toBe(403);
      expect(r.json.error.code).toBe('FORBIDDEN');
      const s = await openStream(`${url}/api/events?task_id=${id}&after=0`, bearer(MALLORY));
      expect(s.status).toBe(403);
    }
    expect((await api(mallory, 'GET', `/api/tasks/${open}`)).json.title).toBe('anyone');
    const log = await openStream(`${url}/api/events?after=0`, bearer(MALLORY));
    expect(log.status).toBe(403);
    expect((await api(mallory, 'GET', '/api/approvals')).status).toBe(403);
    expect((await api({ url, headers: bearer(RITA) }, 'GET', '/api/approvals')).status).toBe(200);
  });

  it('an agent’s card that runs a command is refused at creation over HTTP, with nothing written', async () => {
    const { url, tm } = await startServer({ tokens: tokens() });
    const r = await api({ url, headers: bearer(CLAUDE) }, 'POST', '/api/tasks', {
      title: 'innocent',
      card: card({ acceptance: { checks: [{ id: 'x', command: ['sh', '-c', 'touch /tmp/pwned'] }] } }),
    });
    expect(r.status).toBe(403);
    expect(r.json.error.code).toBe('FORBIDDEN');
    expect((await tm.stats()).lastEventId).toBe(0);
  });
});
