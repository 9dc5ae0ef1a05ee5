import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClaimedTask } from '../../src/engine/index.js';
import { runTaskLoop } from '../../src/workers/loop.js';
import { waitFor } from '../helpers.js';
import { type Harness, card, claimWith, drive, harness, loopContext } from './harness.js';

const operator = { id: 'operator', role: 'operator' } as const;

/**
 * Runs the loop until the write step has started and its tool has begun (it holds for a
 * while after appending), then abandons it as a crash would, and lets the lease lapse.
 */
async function crashDuringWrite(h: Harness, tool: string, file: string): Promise<ClaimedTask> {
  const claim = await claimWith(h, card({
    allowed_tools: [tool, 'noop'],
    budget: { max_steps: 10, max_write_calls: 3 },
    script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool, args: { file, line: 'written', hold_ms: 30_000 } }, { action: 'done' }],
  }));
  const gen = runTaskLoop(loopContext(h, claim));
  for (;;) {
    const { value } = await gen.next();
    if (value !== undefined && typeof value === 'object' && 'type' in value && value.type === 'step_started' && value.step.tool === tool) break;
  }
  // The tool starts, appends and holds; this worker is never heard from again (and if it
  // were, its fenced writes would be refused).
  gen.next().catch(() => undefined);
  await waitFor(() => existsSync(file), 5000, 'the write to land');
  // The lease lapses (claimed with a 30 s default: expire it as the sweep of a dead daemon would).
  await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
  return claim;
}

describe('resuming a run after a crash', () => {
  it('continues after the last finished step, with its budgets and counts carried over', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    await crashDuringWrite(h, 'log_append_once', file);
    const again = (await h.tm.claimTask({ agent: 'rescuer', start: true }))!;
    const { result, events } = await drive(loopContext(h, again));
    expect(events[0]).toMatchObject({ type: 'run_resumed' });
    expect(result).toMatchObject({ phase: 'completed', runId: 1 });
    const runs = await h.runs.runsOf(again.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.usage).toMatchObject({ steps: 3, writeCalls: 1 });
    // The noop before the crash was not run again: one decide per scripted decision.
    const run = await h.runs.getRun(1);
    expect(run.steps.filter((s) => s.kind === 'decide').map((s) => s.status)).toEqual(['ok', 'ok', 'ok']);
  });

  it('retries an interrupted idempotent write with the same idempotency key: it lands once', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    await crashDuringWrite(h, 'log_append_once', file);
    const again = (await h.tm.claimTask({ agent: 'rescuer', start: true }))!;
    await drive(loopContext(h, again));
    expect(readFileSync(file, 'utf8')).toBe('written\n');
    const write = (await h.runs.getRun(1)).steps.find((s) => s.tool === 'log_append_once')!;
    expect(write.status).toBe('ok');
  });

  it('never repeats a non-idempotent write whose outcome is unknown: the run waits for input', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const claim = await crashDuringWrite(h, 'log_append', file);
    const again = (await h.tm.claimTask({ agent: 'rescuer', start: true }))!;
    const { result } = await drive(loopContext(h, again));
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    expect(result.envelope!.side_effects).toEqual([{ tool: 'log_append', args: expect.objectContaining({ line: 'written' }), seq: expect.any(Number), status: 'unknown' }]);
    expect(readFileSync(file, 'utf8')).toBe('written\n');
    expect((await h.tm.getTask(claim.id)).state).toBe('waiting');
  });

  it('a run that waits for input stays open: resuming it is the same run, and an undeclared side effect is never repeated', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const claim = await crashDuringWrite(h, 'log_append', file);
    const parked = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!));
    expect(parked.result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    expect(parked.result.envelope!.safe_resume.condition).toContain(`taskloop task resume ${claim.id} --side-effect happened|not-happened`);
    const [run] = await h.runs.runsOf(claim.id);
    expect(run).toMatchObject({ phase: 'waiting_input', finishedAt: null });

    // Without the operator's word the resume is refused and nothing changes.
    await expect(h.runs.resumeRun({ taskId: claim.id, actor: operator })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    // Only an operator resumes it; the agent that created it, the assignee or a reviewer may not.
    for (const actor of [{ id: 'rescuer', role: 'agent' }, { id: 'rita', role: 'reviewer' }] as const) {
      await expect(h.runs.resumeRun({ taskId: claim.id, actor, sideEffect: 'not_happened' })).rejects.toMatchObject({ code: 'FORBIDDEN' });
    }
    expect((await h.tm.getTask(claim.id)).state).toBe('waiting');

    // A plain move back to pending resumes the same run, which parks again at once: no repeat.
    await h.tm.transitionTask({ taskId: claim.id, to: 'pending', actor: operator });
    const again = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!));
    expect(again.result).toMatchObject({ runId: run!.id, phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    expect(readFileSync(file, 'utf8')).toBe('written\n');
    expect(await h.runs.runsOf(claim.id)).toHaveLength(1);
  });

  for (const [declared, lines] of [['happened', 'written\n'], ['not_happened', 'written\nwritten\n']] as const) {
    it(`resumed with --side-effect ${declared}, the same run goes on with its budgets and planner position: the write lands ${lines.split('\n').length - 1} time(s) in all`, async () => {
      const h = harness();
      const file = join(h.dir, 'log.txt');
      const claim = await crashDuringWrite(h, 'log_append', file);
      await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!));
      const before = (await h.runs.runsOf(claim.id))[0]!;
      await h.runs.resumeRun({ taskId: claim.id, actor: operator, sideEffect: declared, reason: 'checked the log' });
      // The redo holds like the lost attempt did: let it go at once.
      const resumed = drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!));
      if (declared === 'not_happened') {
        await waitFor(() => readFileSync(file, 'utf8') === lines, 5000, 'the write to be carried out again');
        await h.runs.setControl({ target: [claim.id], state: 'stopped', actor: operator });
      }
      const { result } = await resumed;
      const runs = await h.runs.runsOf(claim.id);
      expect(runs).toHaveLength(1);
      expect(result.runId).toBe(before.id);
      expect(readFileSync(file, 'utf8')).toBe(lines);
      const steps = (await h.runs.getRun(before.id)).steps;
      // One decide per scripted decision: the planner did not start over.
      expect(steps.filter((s) => s.kind === 'decide' && s.status === 'ok').length).toBe(declared === 'happened' ? 3 : 2);
      expect(runs[0]!.usage.steps).toBeGreaterThanOrEqual(before.usage.steps);
      // Declared not to have happened, the step is closed and carried out again under a new
      // intent (stopped here while it held, after its line landed: its outcome is unknown).
      expect(steps.filter((s) => s.tool === 'log_append').map((s) => s.status)).toEqual(declared === 'happened' ? ['ok'] : ['abandoned', 'unknown']);
      if (declared === 'happened') expect(result).toMatchObject({ phase: 'completed' });
      const events = (await h.tm.getTask(claim.id)).events;
      expect(events.find((e) => e.type === 'run.resume_requested')).toMatchObject({ actor: 'operator', actorRole: 'operator', data: { side_effect: declared } });
    });
  }

  it('a crash while a write declared not to have happened is carried out again leaves that attempt unknown: it never runs a third time', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const claim = await crashDuringWrite(h, 'log_append', file);
    expect((await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!))).result.stopReason).toBe('unknown_side_effect');
    await h.runs.resumeRun({ taskId: claim.id, actor: operator, sideEffect: 'not_happened', reason: 'checked the log' });
    // The second rescuer carries it out again, and dies while the write holds.
    const gen = runTaskLoop(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer-2', start: true }))!));
    void (async () => {
      while (!(await gen.next()).done);
    })().catch(() => undefined);
    await waitFor(() => readFileSync(file, 'utf8') === 'written\nwritten\n', 5000, 'the write to be carried out again');
    await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
    // The third finds that attempt's intent started: unknown, for a person again; never run again.
    const third = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer-3', start: true }))!));
    expect(third.result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    expect(readFileSync(file, 'utf8')).toBe('written\nwritten\n');
    const [run] = await h.runs.runsOf(claim.id);
    expect((await h.runs.getRun(run!.id)).steps.filter((s) => s.tool === 'log_append').map((s) => s.status)).toEqual(['abandoned', 'unknown']);
  });

  it('a worker whose claim was taken away cannot write another step', async () => {
    const h = harness();
    const claim = await claimWith(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const gen = runTaskLoop(loopContext(h, claim));
    const first = await gen.next(); // run_started
    const runId = (first.value as { run: { id: number } }).run.id;
    await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
    await h.tm.claimTask({ agent: 'thief', start: true });
    const drive = async () => {
      for (;;) if ((await gen.next()).done === true) return;
    };
    // Its decision is held back (journal.ts); the first write it folds into is refused.
    await expect(drive()).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    expect((await h.runs.getRun(runId)).steps).toEqual([]);
  });

  it('a run whose claim was taken away stops reading within one flush: its held-back reads are refused, and few ran after the loss', async () => {
    const h = harness();
    const reads = Array.from({ length: 2000 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `r${i}` } }));
    const claim = await claimWith(h, card({ allowed_tools: ['echo'], budget: { max_steps: 5000 }, script: [...reads, { action: 'done' }] }));
    let calls = 0;
    let callsAtLoss: number | undefined;
    const run = drive(loopContext(h, claim), async (e) => {
      if (e.type !== 'step_finished' || e.step.kind !== 'action') return;
      calls++;
      if (calls === 5) {
        // The lease is lost (the sweep) and another agent claims the task.
        await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
        await h.tm.claimTask({ agent: 'thief', start: true });
        callsAtLoss = calls;
      }
    });
    await expect(run).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    // Reads are not fenced one by one: those held back when the claim went are refused at the
    // run's next flush (20 ms, or 256 held writes: 128 reads with their decisions), never later.
    expect(calls - callsAtLoss!).toBeLessThanOrEqual(128);
    expect(calls).toBeLessThan(reads.length);
  });
});
