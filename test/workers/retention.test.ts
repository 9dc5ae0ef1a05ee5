import { describe, expect, it } from 'vitest';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { waitFor } from '../helpers.js';
import { card, drive, harness, loopContext, runCard } from './harness.js';

describe('retention', () => {
  it('compacts the steps and events of tasks finished before the cutoff, keeping tasks, runs and envelopes', async () => {
    const h = harness();
    const old = await runCard(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const cutoff = (await h.tm.getTask(old.claim.id)).updatedAt + 1;
    await waitFor(() => Date.now() > cutoff, 1000, 'the clock to pass the cutoff'); // the second task finishes after it
    const recent = await runCard(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const cursorBefore = (await h.tm.stats()).lastEventId;

    expect(await h.runs.compact(cutoff)).toBe(1);
    const kept = await h.tm.getTask(old.claim.id);
    expect(kept).toMatchObject({ state: 'completed', events: [] });
    const [run] = await h.runs.runsOf(old.claim.id);
    expect(run!.envelope).toMatchObject({ phase: 'completed' });
    expect((await h.runs.getRun(run!.id)).steps).toEqual([]);
    expect((await h.tm.getTask(recent.claim.id)).events.length).toBeGreaterThan(5);
    // The compaction itself is recorded, so event ids keep growing and are never reused.
    const after = (await h.tm.stats()).lastEventId;
    expect(after).toBe(cursorBefore + 1);
    const [last] = await h.tm.store.readEvents({ afterId: cursorBefore });
    expect(last).toMatchObject({ type: 'retention.compacted', data: { tasks: 1 } });
    expect(await h.runs.compact(cutoff)).toBe(0); // nothing left to compact: no new event either
    expect((await h.tm.stats()).lastEventId).toBe(after);
  });

  it('compacts a task whose run asked for an approval: the approval goes with its step, the task and its run stay', async () => {
    const h = harness();
    const operator = { id: 'operator', role: 'operator' } as const;
    await ticketStoreFor(h.tm.store).seed();
    const { task } = await h.tm.createTask({ title: 'ticket', card: ticketCard('T-1024') }, operator);
    const first = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    expect((await drive(loopContext(h, first))).result).toMatchObject({ phase: 'waiting_approval' });
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: false, actor: operator, reason: 'not at night' });
    const second = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    expect((await drive(loopContext(h, second))).result).toMatchObject({ phase: 'rejected' });
    const cutoff = (await h.tm.getTask(task.id)).updatedAt + 1;
    await waitFor(() => Date.now() > cutoff, 1000, 'the clock to pass the cutoff');

    expect(await h.runs.compact(cutoff)).toBe(1); // it failed on the approval's reference to its step
    expect(await h.runs.listApprovals()).toEqual([]);
    expect(await h.tm.getTask(task.id)).toMatchObject({ state: 'failed', events: [] });
    const [run] = await h.runs.runsOf(task.id);
    expect(run!.envelope).toMatchObject({ phase: 'rejected' });
    expect((await h.runs.getRun(run!.id)).steps).toEqual([]);
  });
});
