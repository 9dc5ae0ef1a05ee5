import { describe, expect, it } from 'vitest';
import { api, card, createAttached, openStream, startServer } from './http-helpers.js';

describe('the lifecycle of a run owned by a stream', () => {
  it('the owner renews the lease of its claim: a stale sweep never takes a long step away', async () => {
    const { url, op, auth, tm } = await startServer({ leaseMs: 300 });
    const id = await createAttached(op, card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 1500 } }, { action: 'done' }] }));
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    await stream.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');
    // Sweep as a daemon would, far more often than the lease, until the run ends.
    const deadline = Date.now() + 15_000;
    while (!stream.done && Date.now() < deadline) {
      await tm.sweep({ graceMs: 50 });
      await new Promise((r) => setTimeout(r, 50));
    }
    const task = await tm.getTask(id);
    expect(task.state).toBe('completed');
    expect(task.events.map((e) => e.type)).not.toContain('task.stale_reclaimed');
  });

  it('a server that shuts down gives its runs back at the next step boundary; a stream on the next server resumes them', async () => {
    const first = await startServer();
    const id = await createAttached(first.op, card({ allowed_tools: ['wait', 'noop'], script: [{ action: 'tool', tool: 'wait', args: { ms: 300 } }, { action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const stream = await openStream(`${first.url}/api/tasks/${id}/events`, first.auth);
    await stream.next((e) => e.event === 'step_started' && e.data.step.tool === 'wait', 'the wait call');
    await first.server.close(5000);
    await stream.ended;
    const released = await first.tm.getTask(id);
    expect(released.state).toBe('pending');
    expect((await first.runs.runsOf(id))[0]).toMatchObject({ phase: 'paused', finishedAt: null });
    expect(stream.events.at(-1)).toMatchObject({ event: 'task.transitioned', data: { data: { to: 'pending' } } });

    const second = await startServer({ path: first.path });
    const resumed = await openStream(`${second.url}/api/tasks/${id}/events`, { ...second.auth, 'last-event-id': String(stream.events.at(-1)!.id) });
    await resumed.ended;
    expect(resumed.events.map((e) => e.event).filter((n) => n.startsWith('run_'))).toEqual(['run_resumed', 'run_finished']);
    const run = (await api(second.op, 'GET', `/api/tasks/${id}`)).json.runs;
    expect(run).toEqual([expect.objectContaining({ phase: 'completed', stop_reason: 'accepted' })]);
    // The wait step finished before the release and was not made again.
    const steps = (await api(second.op, 'GET', `/api/runs/${run[0].id}`)).json.steps;
    expect(steps.filter((s: { tool: string }) => s.tool === 'wait')).toHaveLength(1);
  });
});
