import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers.js';
import { card, harness, runCard } from './harness.js';

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
});
