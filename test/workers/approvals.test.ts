import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runTaskLoop } from '../../src/workers/loop.js';
import { waitFor } from '../helpers.js';
import { ticketCard as seedTicketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { execSql } from '../stores.js';
import { type Harness, card, drive, harness, loopContext } from './harness.js';

const operator = { id: 'operator', role: 'operator' } as const;

/** Seed 003's ticket card, as in DESIGN §9. */
function ticketCard(over: Record<string, unknown> = {}) {
  return { ...seedTicketCard('T-1024'), ...over };
}

async function seeded(h: Harness) {
  const tickets = ticketStoreFor(h.tm.store);
  await tickets.seed();
  return tickets;
}

/** Runs the task until it parks or ends, as a worker would; returns the loop's result. */
async function runOnce(h: Harness, agent = 'worker') {
  const claim = (await h.tm.claimTask({ agent, start: true }))!;
  return drive(loopContext(h, claim));
}

describe('approvals', () => {
  it('a high-risk call parks the run and the task; approve resumes it and runs exactly the approved call (seed 003 path 1: done)', async () => {
    const h = harness();
    const tickets = await seeded(h);
    await h.tm.createTask({ title: 'ticket', card: ticketCard() }, operator);
    const parked = await runOnce(h);
    expect(parked.result).toMatchObject({ phase: 'waiting_approval', stopReason: 'approval_required' });
    const [approval] = await h.runs.listApprovals('pending');
    expect(approval).toMatchObject({ tool: 'notify_oncall', args: { ticket_id: 'T-1024', message: 'T-1024 is now urgent' }, state: 'pending' });
    const task = await h.tm.getTask(approval!.taskId);
    expect(task).toMatchObject({ state: 'waiting', leaseExpiresAt: null });
    expect((await h.runs.runsOf(task.id))[0]!.phase).toBe('waiting_approval');
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: false });

    // The assignee can't approve its own call; an operator can.
    await expect(h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: { id: 'worker', role: 'agent' } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    expect((await h.tm.getTask(task.id)).state).toBe('pending');
    // Decided now: an agent asking again is refused as before, not told it is already approved.
    await expect(h.runs.decideApproval({ approvalId: approval!.id, approve: false, actor: { id: 'mallory', role: 'agent' } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const resumed = await runOnce(h, 'another-worker');
    expect(resumed.result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: true });
    expect(await h.runs.getApproval(approval!.id)).toMatchObject({ state: 'used' });
    expect((await h.tm.getTask(task.id)).attempts).toBe(1); // the wait for a person used up no attempt
    const env = resumed.result.envelope!;
    expect(env.trace.pending_ids).toEqual([`approval-${approval!.id}`]);
    expect(env.side_effects.map((s) => s.tool)).toEqual(['update_ticket_priority', 'notify_oncall']);
    // Budgets were carried across the park: steps counted once each.
    expect((await h.runs.runsOf(task.id))[0]!.usage).toMatchObject({ steps: 3, writeCalls: 2, pending: 1 });
  });

  it('an undecided approval leaves the run waiting (seed 003 path 2), and reject ends it rejected', async () => {
    const h = harness();
    const tickets = await seeded(h);
    await h.tm.createTask({ title: 'ticket', card: ticketCard() }, operator);
    await runOnce(h);
    expect(await h.tm.claimTask({ agent: 'w' })).toBeNull(); // nothing to do while it waits
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: false, actor: operator, reason: 'not at night' });
    const { result } = await runOnce(h);
    expect(result).toMatchObject({ phase: 'rejected', stopReason: 'approval_rejected' });
    expect(result.envelope!.message).toContain('not at night');
    expect((await tickets.get('T-1024')).notified).toBe(false);
    expect((await h.tm.getTask(approval!.taskId)).state).toBe('failed');
  });

  it('an approval that expires degrades the run when the card says so (seed 003 path 3), or fails it', async () => {
    for (const onExpiry of ['degraded', 'failed'] as const) {
      const h = harness();
      const tickets = await seeded(h);
      await h.tm.createTask({ title: 'ticket', card: ticketCard({ approval: { tools: ['notify_oncall'], expires_in: '30m', on_expiry: onExpiry, covers: ['notify_ok'] } }) }, operator);
      await runOnce(h);
      const other = h.other();
      // Thirty minutes pass: the approval's deadline is moved into the past, and the sweep of
      // another process expires it.
      await execSql(h.tm, 'UPDATE approvals SET expires_at = $1', [Date.now() - 1]);
      expect(await other.runs.expireApprovals()).toHaveLength(1);
      const { result } = await runOnce(h);
      if (onExpiry === 'degraded') {
        expect(result).toMatchObject({ phase: 'degraded', stopReason: 'approval_expired' });
        expect(result.envelope!.acceptance).toMatchObject({ verdict: 'failed', failed: ['notify_ok'] });
        expect((await h.tm.getTask(result.taskId)).state).toBe('completed');
      } else {
        expect(result).toMatchObject({ phase: 'failed', stopReason: 'approval_expired' });
      }
      expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: false });
    }
  });

  it('an approval is never reused for a different call; max_pending is enforced', async () => {
    const h = harness();
    await seeded(h);
    const twoNotes = ticketCard({
      budget: { max_steps: 12, max_write_calls: 5, max_pending: 1 },
      script: [
        { action: 'tool', tool: 'notify_oncall', args: { ticket_id: 'T-1024', message: 'first' } },
        { action: 'tool', tool: 'notify_oncall', args: { ticket_id: 'T-1024', message: 'second' } },
        { action: 'done' },
      ],
    });
    await h.tm.createTask({ title: 'two pages', card: twoNotes }, operator);
    await runOnce(h);
    const [first] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: first!.id, approve: true, actor: operator });
    const { result } = await runOnce(h);
    // The second page differs in its arguments: it needs its own approval, which the budget no longer allows.
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'max_pending' });
    expect((await h.runs.listApprovals(undefined)).map((a) => a.state)).toEqual(['used']);
  });

  it('stop --all revokes approvals granted but not yet used', async () => {
    const h = harness();
    await seeded(h);
    await h.tm.createTask({ title: 'ticket', card: ticketCard() }, operator);
    await runOnce(h);
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    await h.runs.setControl({ target: 'all', state: 'stopped', actor: operator });
    expect(await h.runs.getApproval(approval!.id)).toMatchObject({ state: 'revoked' });
    const { result } = await runOnce(h);
    expect(result).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    // The parked call is settled, not left waiting in a cancelled run: refused, and the envelope says so.
    const parked = (await h.runs.getRun(result.runId)).steps.find((s) => s.tool === 'notify_oncall')!;
    expect(parked).toMatchObject({ status: 'rejected', error: 'the run was stopped while the call waited for its approval' });
    expect(result.envelope!.trace.rejected_calls.map((c) => c.tool)).toContain('notify_oncall');
  });

  it('a crash while an approved write runs leaves an unknown side effect, not a rejection; declared not-happened, it needs a new approval', async () => {
    const h = harness();
    const file = join(h.dir, 'paid.txt');
    const hold = join(h.dir, 'hold');
    writeFileSync(hold, '');
    const c = card({
      allowed_tools: ['log_append'],
      budget: { max_steps: 10, max_write_calls: 3 },
      approval: { tools: ['log_append'] },
      script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'paid', hold_while: hold } }, { action: 'done' }],
    });
    const { task } = await h.tm.createTask({ title: 'pay', card: c }, operator);
    expect((await runOnce(h)).result.phase).toBe('waiting_approval');
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    // The approved call runs and the worker dies while it holds.
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    const gen = runTaskLoop(loopContext(h, claim));
    const abandoned = (async () => {
      for (;;) if ((await gen.next()).done === true) return;
    })().catch(() => undefined); // its later writes are refused once the claim is gone
    await waitFor(() => existsSync(file), 5000, 'the approved write to land');
    await h.tm.store.transition({ taskId: task.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
    rmSync(hold);
    await abandoned;

    const again = await runOnce(h, 'rescuer');
    expect(again.result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    expect(readFileSync(file, 'utf8')).toBe('paid\n');
    await h.runs.resumeRun({ taskId: task.id, actor: operator, sideEffect: 'not_happened' });
    const redo = await runOnce(h, 'rescuer');
    expect(redo.result.phase).toBe('waiting_approval'); // its approval was used by the lost attempt
    expect(readFileSync(file, 'utf8')).toBe('paid\n');
    expect((await h.runs.listApprovals('pending')).map((a) => a.id)).not.toContain(approval!.id);
  });
});
