import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClaimedTask } from '../../src/engine/index.js';
import { runTaskLoop } from '../../src/workers/loop.js';
import { waitFor } from '../helpers.js';
import { type Harness, card, claimWith, drive, harness, loopContext } from './harness.js';

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

  it('a worker whose claim was taken away cannot write another step', async () => {
    const h = harness();
    const claim = await claimWith(h, card({ allowed_tools: ['noop'], script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }));
    const gen = runTaskLoop(loopContext(h, claim));
    await gen.next(); // run_started
    await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
    await h.tm.claimTask({ agent: 'thief', start: true });
    await expect(gen.next()).rejects.toMatchObject({ code: 'STALE_CLAIM' });
  });
});
