import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../src/tools/registry.js';
import { card, claimWith, drive, harness, loopContext } from './harness.js';

describe('stop and pause from another process', () => {
  it('a stop aborts the in-flight tool call and ends the run cancelled / user_stop', async () => {
    const h = harness();
    const other = h.other();
    const claim = await claimWith(h, card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 60_000 } }, { action: 'done' }] }));
    const { result, events } = await drive(loopContext(h, claim), async (e) => {
      if (e.type === 'step_started' && e.step.kind === 'action') {
        await other.runs.setControl({ target: [claim.id], state: 'stopped', actor: { id: 'operator', role: 'operator' } });
      }
    });
    expect(result).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    const action = events.find((e) => e.type === 'step_finished' && e.step.kind === 'action');
    // Aborted in flight, or, when the stop is heard before the call starts (a NOTIFY can
    // arrive while the stop's own commit is awaited), never called.
    const { status, error } = (action as { step: { status: string; error: string } }).step;
    expect([status, error]).toSatisfy(([st, err]: string[]) => (st === 'failed' && /aborted/.test(err!)) || (st === 'rejected' && /not called: the run was stopped/.test(err!)));
    const task = await h.tm.getTask(claim.id);
    expect(task.state).toBe('cancelled');
    expect(task.events.map((e) => e.type)).toContain('run.stop_requested');
  });

  it('a stop committed after a write’s step began and before its call: the tool is not called, even when no watcher has reported the stop yet', async () => {
    const h = harness();
    let called = 0;
    h.tools.register(defineTool({ name: 'charge', description: 'A write.', kind: 'write', args: z.object({}), execute: async () => ({ charged: ++called }) }));
    const claim = await claimWith(h, card({ allowed_tools: ['charge'], script: [{ action: 'tool', tool: 'charge', args: {} }, { action: 'done' }] }));
    // No watcher: the stop is committed by another process while this one is busy (or was
    // stopped itself) between the step's commit and the call, as in a daemon under load.
    const { result, events } = await drive(loopContext(h, claim, { watch: () => () => undefined }), async (e) => {
      if (e.type === 'step_started' && e.step.kind === 'action') {
        await h.other().runs.setControl({ target: [claim.id], state: 'stopped', actor: { id: 'operator', role: 'operator' } });
      }
    });
    expect(called).toBe(0);
    expect(result).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    const action = events.find((e) => e.type === 'step_finished' && e.step.kind === 'action');
    expect(action).toMatchObject({ step: { status: 'rejected', error: 'charge: not called: the run was stopped (user_stop)' } });
    // Known not done: not an unknown side effect in the envelope.
    expect(result.envelope?.side_effects).toEqual([]);
  });

  it('a process frozen with many runs between their look at the control and their write, thawed after a stop: at most one write goes out', async () => {
    const h = harness();
    let called = 0;
    h.tools.register(defineTool({ name: 'charge', description: 'A write.', kind: 'write', args: z.object({}), execute: async () => ({ charged: ++called }) }));
    const c = card({ allowed_tools: ['charge'], script: [{ action: 'tool', tool: 'charge', args: {} }, { action: 'done' }] });
    const claims = [await claimWith(h, c), await claimWith(h, c), await claimWith(h, c)];
    // Each run's fresh look reads the store, then waits until every run has looked (or 300 ms
    // pass: a look that cannot start while another run's is open). The first look through
    // commits the stop before it answers: the process froze right after that look, and the
    // stop committed meanwhile. Runs that had looked alongside it would call after the stop.
    const looked: (() => void)[] = [];
    let stopped: Promise<unknown> | undefined;
    const runs = new Proxy(h.runs, {
      get(target, prop, receiver) {
        if (prop !== 'getControl') return Reflect.get(target, prop, receiver);
        return async (taskId: number, opts?: { fresh?: boolean }) => {
          const seen = await target.getControl(taskId, opts);
          if (opts?.fresh !== true) return seen;
          await new Promise<void>((resolve) => {
            looked.push(resolve);
            if (looked.length === claims.length) for (const r of looked) r();
            setTimeout(resolve, 300);
          });
          stopped ??= h.other().runs.setControl({ target: claims.map((k) => k.id), state: 'stopped', actor: { id: 'operator', role: 'operator' } });
          await stopped;
          return seen;
        };
      },
    });
    const results = await Promise.all(claims.map((claim) => drive(loopContext(h, claim, { runs, watch: () => () => undefined }))));
    expect(called).toBe(1);
    const steps = results.map((r) => (r.events.find((e) => e.type === 'step_finished' && e.step.kind === 'action') as { step: { status: string } }).step.status);
    expect(steps.sort()).toEqual(['ok', 'rejected', 'rejected']);
    // The one that wrote ends as it would have (no watcher here reports the stop to it); the others cancelled.
    expect(results.map((r) => r.result.phase).sort()).toEqual(['cancelled', 'cancelled', 'completed']);
  });

  it('stop --all stops every live run and leaves the backlog alone; stopping a task that never ran cancels it', async () => {
    const h = harness();
    const claim = await claimWith(h, card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 60_000 } }] }));
    const idle = (await h.tm.createTask({ title: 'never ran' }, { id: 'operator', role: 'operator' })).task;
    const { result } = await drive(loopContext(h, claim), async (e) => {
      if (e.type === 'step_started' && e.step.kind === 'action') {
        const affected = await h.other().runs.setControl({ target: 'all', state: 'stopped', actor: { id: 'operator', role: 'operator' } });
        expect(affected).toEqual([claim.id]);
      }
    });
    expect(result.stopReason).toBe('user_stop');
    expect((await h.tm.getTask(idle.id)).state).toBe('pending');
    await h.runs.setControl({ target: [idle.id], state: 'stopped', actor: { id: 'operator', role: 'operator' } });
    expect((await h.tm.getTask(idle.id)).state).toBe('cancelled');
  });

  it('pause parks the run between steps and resume continues it; an agent that is not the creator may not pause', async () => {
    const h = harness();
    const other = h.other();
    const operator = { id: 'operator', role: 'operator' } as const;
    // Enough fast reads that the run is still going when the pause lands: a run whose calls do
    // no I/O sees a control change from another connection within a millisecond (loop.ts).
    const reads = Array.from({ length: 200 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const claim = await claimWith(h, card({ allowed_tools: ['echo'], budget: { max_steps: 500 }, script: [...reads, { action: 'done' }] }));
    await expect(other.runs.setControl({ target: [claim.id], state: 'paused', actor: { id: 'stranger', role: 'agent' } })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    const { result, events } = await drive(loopContext(h, claim), async (e, all) => {
      if (e.type === 'step_finished' && e.step.kind === 'action' && all.filter((x) => x.type === 'run_paused').length === 0) {
        await other.runs.setControl({ target: [claim.id], state: 'paused', actor: operator });
      }
      if (e.type === 'run_paused') {
        expect((await h.runs.runsOf(claim.id))[0]!.phase).toBe('paused');
        // Resume from the other connection while the loop waits.
        setTimeout(() => void other.runs.setControl({ target: [claim.id], state: 'running', actor: operator }), 20);
      }
    });
    expect(events.map((e) => e.type).filter((t) => t.startsWith('run_'))).toEqual(['run_started', 'run_paused', 'run_resumed', 'run_finished']);
    expect(result.phase).toBe('completed');
    // Parked between steps: every call ran once, some before the pause and the rest after it.
    const paused = events.findIndex((e) => e.type === 'run_paused');
    const actions = (from: number, to: number) => events.slice(from, to).filter((e) => e.type === 'step_finished' && e.step.kind === 'action').length;
    expect(actions(0, paused)).toBeGreaterThan(0);
    expect(actions(paused, events.length)).toBeGreaterThan(0);
    expect(actions(0, events.length)).toBe(200);
    await expect(other.runs.setControl({ target: [claim.id], state: 'running', actor: operator })).rejects.toMatchObject({ code: 'INVALID_TRANSITION' });
  });

  it('a paused run ends at its deadline (budget_exhausted / deadline) instead of holding its seat until someone resumes it', async () => {
    const h = harness();
    const other = h.other();
    const reads = Array.from({ length: 200 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const claim = await claimWith(h, card({ allowed_tools: ['echo'], budget: { max_steps: 500, deadline: '1s' }, script: [...reads, { action: 'done' }] }));
    const { result, events } = await drive(loopContext(h, claim), async (e, all) => {
      if (e.type === 'step_finished' && e.step.kind === 'action' && all.filter((x) => x.type === 'run_paused').length === 0) {
        await other.runs.setControl({ target: [claim.id], state: 'paused', actor: { id: 'operator', role: 'operator' } });
      }
    });
    // Never resumed: the deadline alone ended it, without a resume in between.
    expect(events.map((e) => e.type).filter((t) => t.startsWith('run_'))).toEqual(['run_started', 'run_paused', 'run_finished']);
    expect(result).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    expect((await h.runs.runsOf(claim.id))[0]).toMatchObject({ phase: 'budget_exhausted', stopReason: 'deadline' });
    expect((await h.tm.getTask(claim.id)).state).toBe('failed');
  });

  it('a run whose calls do no I/O still lets its thread\'s event loop turn between steps (timers, file events, messages)', async () => {
    const h = harness();
    const reads = Array.from({ length: 200 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const claim = await claimWith(h, card({ allowed_tools: ['echo'], budget: { max_steps: 500 }, script: [...reads, { action: 'done' }] }));
    let actions = 0;
    let firedAt: number | undefined;
    const { result } = await drive(loopContext(h, claim), (e) => {
      if (e.type === 'run_started') setTimeout(() => (firedAt = actions), 0);
      if (e.type === 'step_finished' && e.step.kind === 'action') actions++;
    });
    expect(result.phase).toBe('completed');
    expect(actions).toBe(200);
    // The timer ran mid-run, not after it: a control change from another process (delivered
    // the same way, as a file event or a NOTIFY) is seen between steps.
    expect(firedAt).toBeDefined();
    expect(firedAt!).toBeLessThan(200);
  });

  it('cancelling a task mid-run ends its run too, and the loop stops at once', async () => {
    const h = harness();
    const other = h.other();
    // A ten-minute wait: only the abort lets this test finish within its timeout.
    const claim = await claimWith(h, card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 600_000 } }, { action: 'done' }] }));
    const run = drive(loopContext(h, claim), async (e) => {
      if (e.type === 'step_started' && e.step.kind === 'action') await other.tm.cancelTask({ taskId: claim.id, actor: { id: 'operator', role: 'operator' }, reason: 'no longer needed' });
    });
    await expect(run).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    const [finished] = await h.runs.runsOf(claim.id);
    expect(finished).toMatchObject({ phase: 'cancelled', stopReason: 'task_cancelled', envelope: { phase: 'cancelled', stop_reason: 'task_cancelled' } });
    expect(finished!.finishedAt).not.toBeNull();
  });
  it('a drain while a run is paused releases it once, still paused, instead of pausing it again and again', async () => {
    const h = harness();
    const operator = { id: 'operator', role: 'operator' } as const;
    const reads = Array.from({ length: 200 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const claim = await claimWith(h, card({ allowed_tools: ['echo'], budget: { max_steps: 500 }, script: [...reads, { action: 'done' }] }));
    let draining = false;
    let pauses = 0;
    const { result } = await drive(loopContext(h, claim, { draining: () => draining }), async (e, all) => {
      if (e.type === 'step_finished' && e.step.kind === 'action' && all.filter((x) => x.type === 'run_paused').length === 0) {
        await h.other().runs.setControl({ target: [claim.id], state: 'paused', actor: operator });
      }
      if (e.type === 'run_paused') {
        // A second pause of the same run means the loop went round while draining.
        if (++pauses > 1) throw new Error(`paused ${pauses} times`);
        setTimeout(() => (draining = true), 20);
      }
    });
    expect(result).toMatchObject({ phase: 'released', stopReason: 'shutdown' });
    const task = await h.tm.getTask(claim.id);
    expect(task.state).toBe('pending');
    // One pause by the operator, one release by the drain (a released run is parked paused).
    expect(task.events.filter((e) => e.type === 'run.paused').map((e) => e.data.reason)).toEqual(['user_pause', 'daemon shutting down']);
    // Claimed again elsewhere, it is still paused: it waits for an operator's resume.
    expect(await h.runs.getControl(claim.id)).toBe('paused');
  });
});
