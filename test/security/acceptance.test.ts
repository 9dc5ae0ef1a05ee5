/**
 * "Acceptance is the only road to completed." The one exception, `degraded`, is meant for a
 * run whose approval expired and whose acceptance "missed only what it would have done"
 * (README, run endings). The loop does not check the second half
 * (src/workers/loop.ts: `degraded = report.verdict === 'failed' && state.degraded`): any
 * acceptance failure, after any expired approval, ends `degraded`, and `degraded` moves the
 * task to `completed` (loop-context.ts movesFor). So a planner that wants a task marked
 * done without doing it asks for a high-risk call nobody will answer in time, then says
 * "done": the task completes with none of its work done.
 */
import { describe, expect, it } from 'vitest';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { operator } from '../helpers.js';
import { execSql } from '../stores.js';
import { drive, harness, loopContext } from '../workers/harness.js';

describe('degraded is not a way around acceptance', () => {
  it('a run that skips the work acceptance checks, and lets an approval expire, fails; the task does not complete', async () => {
    const h = harness();
    const tickets = ticketStoreFor(h.tm.store);
    await tickets.seed();
    // The operator's seed ticket card (on_expiry: degraded). The planner never raises the
    // priority; it asks to page on-call first and then says done.
    const c = { ...ticketCard('T-1024'), script: [
      { action: 'tool', tool: 'notify_oncall', args: { ticket_id: 'T-1024', message: 'page' } },
      { action: 'done' },
    ] };
    await h.tm.createTask({ title: 'ticket', card: c }, operator);
    const parked = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'worker', start: true }))!));
    expect(parked.result).toMatchObject({ phase: 'waiting_approval' });
    // Nobody answers within expires_in.
    await execSql(h.tm, 'UPDATE approvals SET expires_at = $1', [Date.now() - 1]);
    expect(await h.runs.expireApprovals()).toHaveLength(1);
    const { result } = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'worker', start: true }))!));

    // priority_ok failed too, and raising the priority is not what the expired call would have done.
    expect(result.envelope!.acceptance).toMatchObject({ verdict: 'failed' });
    expect((result.envelope!.acceptance as { failed: string[] }).failed).toContain('priority_ok');
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'normal' });
    expect(result.phase).toBe('failed');
    expect((await h.tm.getTask(result.taskId)).state).not.toBe('completed');
  });
});
