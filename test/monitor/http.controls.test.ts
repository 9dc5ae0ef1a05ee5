import { describe, expect, it } from 'vitest';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { waitFor } from '../helpers.js';
import { api, card, createAttached, openStream, startServer, waitCard } from './http-helpers.js';

describe('run controls over HTTP', () => {
  it('stop-all stops every live run (each stream ends with run_finished cancelled / user_stop) and leaves the backlog alone', async () => {
    const { url, op, auth, tm } = await startServer();
    const a = await createAttached(op, waitCard());
    const b = await createAttached(op, waitCard());
    const backlog = (await api(op, 'POST', '/api/tasks', { title: 'backlog', card: card(), attach: false })).json.id;
    const streams = await Promise.all([a, b].map((id) => openStream(`${url}/api/tasks/${id}/events`, auth)));
    await Promise.all(streams.map((s) => s.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call')));

    const r = await api(op, 'POST', '/api/tasks/stop-all', { reason: 'emergency stop' });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ state: 'stopped', tasks: [a, b] });
    for (const s of streams) {
      await s.ended;
      expect(s.events.at(-1)).toMatchObject({ event: 'task.cancelled' });
      expect(s.events.find((e) => e.event === 'run_finished')!.data.envelope).toMatchObject({ phase: 'cancelled', stop_reason: 'user_stop' });
    }
    expect((await tm.getTask(backlog)).state).toBe('pending');
  });

  it('pause holds a run between steps and resume continues it to completion', async () => {
    const { url, op, auth } = await startServer();
    const id = await createAttached(op, card({ allowed_tools: ['wait', 'noop'], script: [{ action: 'tool', tool: 'wait', args: { ms: 1000 } }, { action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await stream.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');
    expect((await api(op, 'POST', `/api/tasks/${id}/pause`)).json).toEqual({ state: 'paused', tasks: [id] });
    const paused = await stream.next((e) => e.event === 'run_paused', 'the pause');
    expect(paused.data.data.reason).toBe('user_pause');
    expect(stream.events.some((e) => e.event === 'step_started' && e.data.step.tool === 'noop')).toBe(false);
    expect((await api(op, 'POST', `/api/tasks/${id}/resume`, { reason: 'go on' })).json).toEqual({ state: 'running', tasks: [id] });
    await stream.ended;
    expect(stream.events.map((e) => e.event).filter((n) => n.startsWith('run_'))).toEqual(['run_started', 'run_paused', 'run_resumed', 'run_finished']);
    expect(stream.events.find((e) => e.event === 'run_finished')!.data.envelope.phase).toBe('completed');
    const again = await api(op, 'POST', `/api/tasks/${id}/resume`);
    expect(again.status).toBe(409);
  });
});

describe('approvals over HTTP', () => {
  it('a high-risk call parks the streamed run; approving it over HTTP resumes the same stream to completion', async () => {
    const { url, op, auth, tm } = await startServer();
    const tickets = ticketStoreFor(tm.store);
    await tickets.seed();
    const id = await createAttached(op, ticketCard('T-1024'));
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    const requested = await stream.next((e) => e.event === 'approval.requested', 'the approval request');
    await stream.next((e) => e.event === 'task.transitioned' && e.data.data.to === 'waiting', 'the task to wait');
    const approvalId = requested.data.data.approval_id as number;

    const pending = (await api(op, 'GET', '/api/approvals')).json.approvals;
    expect(pending).toEqual([expect.objectContaining({ id: approvalId, task_id: id, tool: 'notify_oncall', state: 'pending', args: { ticket_id: 'T-1024', message: 'T-1024 is now urgent' } })]);
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: false });
    expect(stream.done).toBe(false);

    const decided = await api(op, 'POST', `/api/approvals/${approvalId}/approve`, { reason: 'go ahead' });
    expect(decided.status).toBe(200);
    expect(decided.json).toMatchObject({ id: approvalId, state: 'approved', reason: 'go ahead', decided_by: 'operator' });
    await stream.ended;
    const names = stream.events.map((e) => e.event);
    expect(names.filter((n) => n.startsWith('run_'))).toEqual(['run_started', 'run_paused', 'run_resumed', 'run_finished']);
    expect(stream.events.at(-1)!.data).toMatchObject({ type: 'task.transitioned', data: { to: 'completed' } });
    expect(stream.events.find((e) => e.event === 'run_finished')!.data.envelope).toMatchObject({ phase: 'completed', stop_reason: 'accepted' });
    expect(await tickets.get('T-1024')).toMatchObject({ notified: true });
    expect((await api(op, 'GET', '/api/approvals?state=all')).json.approvals[0]).toMatchObject({ id: approvalId, state: 'used' });
    expect((await api(op, 'POST', `/api/approvals/${approvalId}/reject`)).status).toBe(409);
  });

  it('rejecting it ends the run rejected / approval_rejected', async () => {
    const { url, op, auth, tm } = await startServer();
    await ticketStoreFor(tm.store).seed();
    const id = await createAttached(op, ticketCard('T-1030'));
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    const requested = await stream.next((e) => e.event === 'approval.requested', 'the approval request');
    await waitFor(async () => (await api(op, 'GET', `/api/tasks/${id}`)).json.state === 'waiting', 10_000, 'the task to wait');
    const r = await api(op, 'POST', `/api/approvals/${requested.data.data.approval_id}/reject`, { reason: 'not now' });
    expect(r.json).toMatchObject({ state: 'rejected', reason: 'not now' });
    await stream.ended;
    expect(stream.events.find((e) => e.event === 'run_finished')!.data.envelope).toMatchObject({ phase: 'rejected', stop_reason: 'approval_rejected' });
    expect((await api(op, 'GET', '/api/approvals?state=bogus')).status).toBe(400);
  });
});
