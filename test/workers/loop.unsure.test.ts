/**
 * A write whose call ended without an answer (its time limit passed, or the run was stopped
 * while it ran) may have taken effect: it is never tried again as if it had failed
 * (src/workers/unsure.ts). The tools here ignore their signal and land their line late.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type Run, type Step, checkCard } from '../../src/engine/index.js';
import { rebuildState } from '../../src/workers/loop-state.js';
import { waitFor } from '../helpers.js';
import { card, claimWith, drive, harness, loopContext, runCard } from './harness.js';

const operator = { id: 'operator', role: 'operator' } as const;
const lines = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');

describe('a write whose call timed out or was cut off', () => {
  it('a non-idempotent write that timed out is unknown: the run waits for a person instead of the planner trying it again', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const write = { action: 'tool', tool: 'late_append', args: { file, line: 'paid', delay_ms: 400 } };
    // A planner that tries again after a failure: the same write twice.
    const { result, claim } = await runCard(h, card({ allowed_tools: ['late_append'], budget: { max_steps: 10, max_write_calls: 5 }, script: [write, write, { action: 'done' }] }));
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    // The call did take effect, after its time limit: once, not twice.
    await waitFor(() => lines(file) === 'paid\n', 5000, 'the late write to land');
    await sleep(600);
    expect(lines(file)).toBe('paid\n');
    const steps = (await h.runs.getRun(result.runId)).steps.filter((s) => s.kind === 'action');
    expect(steps.map((s) => s.status)).toEqual(['unknown']);
    expect(steps[0]!.error).toMatch(/late_append: timed out after 200 ms; the write may or may not have taken effect/);
    expect(result.envelope).toMatchObject({ safe_resume: { condition: expect.stringContaining(`taskloop task resume ${claim.id} --side-effect`) } });
    // Resuming needs the operator's word on it; "happened" counts it done, and the planner
    // goes on from where it was (its next decision is the second write: it runs once).
    await expect(h.runs.resumeRun({ taskId: claim.id, actor: operator })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await h.runs.resumeRun({ taskId: claim.id, actor: operator, sideEffect: 'happened' });
    const again = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'rescuer', start: true }))!));
    expect(again.result).toMatchObject({ runId: result.runId, phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    await waitFor(() => lines(file) === 'paid\npaid\n', 5000, 'the second write');
    const after = (await h.runs.getRun(result.runId)).steps.filter((s) => s.kind === 'action');
    expect(after.map((s) => s.status)).toEqual(['ok', 'unknown']);
  });

  it('a stop while a non-idempotent write runs leaves it unknown, not failed', async () => {
    const h = harness();
    const other = h.other();
    const file = join(h.dir, 'log.txt');
    const claim = await claimWith(h, card({ allowed_tools: ['log_append'], script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'paid', hold_ms: 60_000 } }, { action: 'done' }] }));
    const { result } = await drive(loopContext(h, claim), async (e) => {
      // (The tool runs once this handler returns: the stop comes once its line has landed.)
      if (e.type === 'step_started' && e.step.kind === 'action') {
        void waitFor(() => lines(file) === 'paid\n', 5000, 'the write to land').then(() => other.runs.setControl({ target: [claim.id], state: 'stopped', actor: operator }));
      }
    });
    expect(result).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    const step = (await h.runs.getRun(result.runId)).steps.find((s) => s.kind === 'action')!;
    expect(step).toMatchObject({ status: 'unknown', error: expect.stringMatching(/log_append: aborted .*may or may not have taken effect/) });
  });

  it('an idempotent write that timed out is tried again only under the same key: it lands once', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const write = (line: string) => ({ action: 'tool', tool: 'late_append_once', args: { file, line, delay_ms: 400 } });
    const { result } = await runCard(h, card({
      allowed_tools: ['late_append_once'],
      budget: { max_steps: 20, max_write_calls: 5, max_failures: 5 },
      // The same call twice, then a different call (a new key), then the first again after its
      // definite answer (a new key: a deliberate repeat is not swallowed).
      script: [write('a'), write('a'), write('b'), write('a'), { action: 'done' }],
    }));
    const steps = (await h.runs.getRun(result.runId)).steps.filter((s) => s.kind === 'action');
    expect(steps.map((s) => s.status)).toEqual(['failed', 'ok', 'failed', 'failed']);
    expect(steps[0]!.error).toMatch(/timed out after 200 ms; its outcome is unknown: calling it again with the same arguments repeats it under the same idempotency key/);
    expect(steps[1]!.idempotencyKey).toBe(steps[0]!.idempotencyKey);
    expect(steps[1]!.result).toMatchObject({ replay: true });
    expect(steps[2]!.idempotencyKey).not.toBe(steps[0]!.idempotencyKey);
    expect(steps[3]!.idempotencyKey).not.toBe(steps[0]!.idempotencyKey);
    // a once, b once, and a again as its own call.
    expect(lines(file)).toBe('a\nb\na\n');
  });

  it('a resumed run keeps the key of an idempotent write of unknown outcome (rebuilt from its steps)', () => {
    const h = harness();
    const step = (seq: number, status: Step['status'], error: string | null, key: string, args: unknown): Step => ({
      id: seq, runId: 1, seq, kind: 'action', status, tool: 'late_append_once', args, result: null, error, durationMs: 0, tokens: 0, idempotencyKey: key, startedAt: 0, finishedAt: 0,
    });
    const unsure = 'late_append_once: timed out after 200 ms; its outcome is unknown: calling it again with the same arguments repeats it under the same idempotency key';
    const run = { id: 1, taskId: 7, usage: { steps: 3, tokens: 0, writeCalls: 3, consecutiveFailures: 0, pending: 0 } } as unknown as Run;
    const checked = checkCard(card({ allowed_tools: ['late_append_once'] }));
    if (!checked.ok) throw new Error(checked.problems.join('; '));
    const a = { file: 'f', line: 'a', delay_ms: 0 };
    const b = { file: 'f', line: 'b', delay_ms: 0 };
    const c = { file: 'f', line: 'c', delay_ms: 0 };
    const steps = [step(1, 'failed', unsure, 'k-a', a), step(2, 'failed', unsure, 'k-b', b), step(3, 'ok', null, 'k-b2', b), step(4, 'failed', 'late_append_once: refused by the server', 'k-c', c)];
    const state = rebuildState(run, steps, checked.card, h.tools);
    expect([...state.unsure.values()]).toEqual(['k-a']);
  });
});
