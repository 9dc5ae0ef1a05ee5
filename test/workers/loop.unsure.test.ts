/**
 * A write whose call ended without an answer (its time limit passed, or the run was stopped
 * while it ran) may have taken effect: it is never tried again as if it had failed
 * (src/workers/unsure.ts). The tools here ignore their signal and land their line late.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { type Run, type Step, checkCard } from '../../src/engine/index.js';
import { z } from 'zod';
import { defineTool } from '../../src/tools/registry.js';
import { executeTool } from '../../src/workers/execute.js';
import { rebuildState } from '../../src/workers/loop-state.js';
import { runTaskLoop } from '../../src/workers/loop.js';
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

  it('a retry under the kept key that fails on its own (a 429) keeps the key: the third try still lands once', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const reject = join(h.dir, 'reject-next');
    const pay = { action: 'tool', tool: 'late_append_once', args: { file, line: 'paid', delay_ms: 400, reject_file: reject } };
    const { result } = await drive(loopContext(h, await claimWith(h, card({ allowed_tools: ['late_append_once'], budget: { max_steps: 20, max_write_calls: 5, max_failures: 5 }, script: [pay, pay, pay, { action: 'done' }] }))), (e) => {
      // After the first attempt timed out, the service refuses the next call before it looks at the key.
      if (e.type === 'step_finished' && e.step.kind === 'action' && e.step.seq < 4) writeFileSync(reject, '');
    });
    const steps = (await h.runs.getRun(result.runId)).steps.filter((s) => s.kind === 'action');
    expect(steps.map((s) => [s.status, s.idempotencyKey === steps[0]!.idempotencyKey])).toEqual([['failed', true], ['failed', true], ['ok', true]]);
    expect(steps[1]!.error).toMatch(/429 rate limited/);
    expect(lines(file)).toBe('paid\n');
  });

  it('an idempotent write of unknown outcome is listed in side_effects, and a run that ends with one says so in safe_resume', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const { result } = await runCard(h, card({ allowed_tools: ['late_append_once'], script: [{ action: 'tool', tool: 'late_append_once', args: { file, line: 'a', delay_ms: 400 } }, { action: 'fail', reason: 'gave up' }] }));
    expect(result).toMatchObject({ phase: 'failed', stopReason: 'planner_fail' });
    expect(result.envelope!.side_effects).toEqual([{ tool: 'late_append_once', args: { file, line: 'a', delay_ms: 400 }, seq: 2, status: 'unknown', repeatable: true }]);
    expect(result.envelope!.safe_resume.condition).toMatch(/^check whether step 2 \(late_append_once\) took effect: the outcome is unknown, and a new run does not know it was tried/);
  });

  it('a failure whose text only quotes the words "its outcome is unknown" keeps no key: the mark is the step’s result, not its text', async () => {
    const h = harness();
    const file = join(h.dir, 'its outcome is unknown', 'log.txt');
    const write = { action: 'tool', tool: 'late_append_once', args: { file, line: 'a', delay_ms: 0 } };
    const { result } = await runCard(h, card({ allowed_tools: ['late_append_once'], budget: { max_steps: 20, max_failures: 5 }, script: [write, write, { action: 'done' }] }));
    const steps = (await h.runs.getRun(result.runId)).steps.filter((s) => s.kind === 'action');
    expect(steps.map((s) => s.status)).toEqual(['failed', 'failed']);
    expect(steps[0]!.error).toMatch(/its outcome is unknown/);
    expect(steps[1]!.idempotencyKey).not.toBe(steps[0]!.idempotencyKey);
  });

  it('a write whose output is over the cap took effect: it is ok without its output, not failed and done again', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const big = 'x'.repeat(70_000);
    const { result } = await runCard(h, card({ allowed_tools: ['log_append'], budget: { max_steps: 20, max_write_calls: 5 }, script: [{ action: 'tool', tool: 'log_append', args: { file, line: big } }, { action: 'done' }] }));
    expect(result.phase).toBe('completed');
    const step = (await h.runs.getRun(result.runId)).steps.find((s) => s.kind === 'action')!;
    expect(step).toMatchObject({ status: 'ok', result: { output_dropped: expect.stringMatching(/log_append: output of \d+ bytes exceeds the cap of \d+/) } });
    expect(result.envelope!.side_effects).toMatchObject([{ tool: 'log_append', status: 'done' }]);
    expect(lines(file).length).toBe(big.length + 1);
  });

  it('a tool that says it cannot tell (TOOL_OUTCOME_UNKNOWN) is treated as a write that timed out', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const write = { action: 'tool', tool: 'unsure_append', args: { file, line: 'paid' } };
    const { result } = await runCard(h, card({ allowed_tools: ['unsure_append'], budget: { max_steps: 20, max_write_calls: 5 }, script: [write, write, { action: 'done' }] }));
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'unknown_side_effect' });
    const step = (await h.runs.getRun(result.runId)).steps.find((s) => s.kind === 'action')!;
    expect(step).toMatchObject({ status: 'unknown', error: expect.stringMatching(/unsure_append: TOOL_OUTCOME_UNKNOWN: the connection dropped/) });
    expect(lines(file)).toBe('paid\n');
  });

  it('a run stopped before a crash took it away carries nothing out again when claimed: it ends cancelled', async () => {
    const h = harness();
    const file = join(h.dir, 'log.txt');
    const claim = await claimWith(h, card({ allowed_tools: ['log_append'], budget: { max_steps: 10, max_write_calls: 3 }, script: [{ action: 'tool', tool: 'log_append', args: { file, line: 'paid', hold_ms: 30_000 } }, { action: 'done' }] }));
    // The worker starts the write and is never heard from again (its later writes are fenced).
    const gen = runTaskLoop(loopContext(h, claim));
    for (;;) {
      const { value } = await gen.next();
      if (value !== undefined && typeof value === 'object' && 'type' in value && value.type === 'step_started' && value.step.tool === 'log_append') break;
    }
    gen.next().catch(() => undefined);
    await waitFor(() => lines(file) === 'paid\n', 5000, 'the write to land');
    await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: { id: 'sweeper', role: 'system' } });
    // The stop came while no one ran it.
    await h.other().runs.setControl({ target: [claim.id], state: 'stopped', actor: operator });
    // As a claimer would, look again while nothing is found: on PostgreSQL the first worker's
    // refused write (it heard the stop) may hold the row for a moment, and SKIP LOCKED skips it.
    let again = await h.tm.claimTask({ agent: 'rescuer', start: true });
    for (let i = 0; again === null && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await h.tm.claimTask({ agent: 'rescuer', start: true });
    }
    expect(again?.id).toBe(claim.id);
    const { result } = await drive(loopContext(h, again!));
    expect(result).toMatchObject({ phase: 'cancelled', stopReason: 'user_stop' });
    expect((await h.tm.getTask(claim.id)).state).toBe('cancelled');
    expect(lines(file)).toBe('paid\n');
    // Settled as it stands, not left started: the envelope names the write that may have landed.
    const write = (await h.runs.getRun(result.runId)).steps.find((s) => s.tool === 'log_append')!;
    expect(write.status).toBe('unknown');
    expect(result.envelope!.side_effects).toMatchObject([{ tool: 'log_append', seq: write.seq, status: 'unknown' }]);
    expect(result.envelope!.safe_resume.condition).toMatch(new RegExp(`^check whether step ${write.seq} \\(log_append\\) took effect`));
  });

  it('a write whose output cannot be written as JSON did its work: ok without its output; a read with such an output fails', async () => {
    const bigint = (kind: 'read' | 'write') =>
      defineTool({ name: `bigint_${kind}`, description: 'Answers with a BigInt.', kind, args: z.object({}), execute: async () => ({ n: 10n }) });
    const ctx = { taskId: 1, runId: 1, agent: 'a', actor: { id: 'a', role: 'agent' as const }, idempotencyKey: 'k', services: {} as never };
    expect(await executeTool(bigint('write'), {}, ctx, new AbortController().signal)).toMatchObject({ ok: true, result: { output_dropped: expect.stringMatching(/^bigint_write: its output cannot be written as JSON/) } });
    expect(await executeTool(bigint('read'), {}, ctx, new AbortController().signal)).toMatchObject({ ok: false, errorType: 'output_unserializable' });
  });

  it('a resumed run keeps the key of an idempotent write of unknown outcome (rebuilt from its steps) until that call succeeds', () => {
    const h = harness();
    const step = (seq: number, status: Step['status'], result: unknown, key: string, args: unknown): Step => ({
      id: seq, runId: 1, seq, kind: 'action', status, tool: 'late_append_once', args, result, error: status === 'ok' ? null : 'late_append_once: its outcome is unknown', durationMs: 0, tokens: 0, idempotencyKey: key, startedAt: 0, finishedAt: 0,
    });
    const run = { id: 1, taskId: 7, usage: { steps: 3, tokens: 0, writeCalls: 3, consecutiveFailures: 0, pending: 0 } } as unknown as Run;
    const checked = checkCard(card({ allowed_tools: ['late_append_once'] }));
    if (!checked.ok) throw new Error(checked.problems.join('; '));
    const a = { file: 'f', line: 'a', delay_ms: 0 };
    const b = { file: 'f', line: 'b', delay_ms: 0 };
    const c = { file: 'f', line: 'c', delay_ms: 0 };
    const unsure = { outcome: 'unknown' };
    const steps = [
      step(1, 'failed', unsure, 'k-a', a), step(2, 'failed', null, 'k-a', a), // a: unsure, then a plain failure under its key: still kept
      step(3, 'failed', unsure, 'k-b', b), step(4, 'ok', null, 'k-b', b), // b: unsure, then done: forgotten
      step(5, 'failed', null, 'k-c', c), // c: a plain failure (its text quotes the words): never kept
    ];
    const state = rebuildState(run, steps, checked.card, h.tools);
    expect([...state.unsure.values()]).toEqual(['k-a']);
    // b's attempt of unknown outcome is settled by its success under the same key.
    expect(state.trace.sideEffects.map((e) => [e.seq, e.status])).toEqual([[1, 'unknown'], [4, 'done']]);
  });
});

describe('a run ended outside it while a write is begun', () => {
  const operatorActor = { id: 'operator', role: 'operator' as const };

  it('a cancel during the call: the begun write is settled unknown and is the envelope’s side effect', async () => {
    const h = harness();
    const other = h.other();
    let taskId = 0;
    h.tools.register(defineTool({
      name: 'charge', description: 'A write.', kind: 'write', args: z.object({ amount: z.int() }),
      // The operator cancels the task while the charge is going out.
      execute: async () => (await other.tm.cancelTask({ taskId, actor: operatorActor, reason: 'changed my mind' }), { charged: true }),
    }));
    h.tools.register(defineTool({ name: 'put', description: 'A write.', kind: 'write', args: z.object({ n: z.int() }), execute: async ({ n }) => ({ n }) }));
    const claim = await claimWith(h, card({
      allowed_tools: ['put', 'echo', 'charge'],
      script: [
        { action: 'tool', tool: 'put', args: { n: 1 } },
        { action: 'tool', tool: 'echo', args: { text: 'a read' } },
        { action: 'tool', tool: 'charge', args: { amount: 5 } },
        { action: 'done' },
      ],
    }));
    taskId = claim.id;
    await expect(drive(loopContext(h, claim))).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    const [ended] = await h.runs.runsOf(claim.id);
    const run = await h.runs.getRun(ended!.id);
    expect(run.steps.find((s) => s.tool === 'charge')).toMatchObject({ status: 'unknown', error: expect.stringContaining('may or may not have taken effect') });
    // The write done and the write begun, not the read between them.
    expect(run.envelope).toMatchObject({ phase: 'cancelled' });
    expect((run.envelope as { side_effects: unknown[] }).side_effects).toEqual([
      { tool: 'put', args: { n: 1 }, seq: expect.any(Number), status: 'done' },
      { tool: 'charge', args: { amount: 5 }, seq: expect.any(Number), status: 'unknown' },
    ]);
    expect((run.envelope as { safe_resume: { condition: string } }).safe_resume.condition).toMatch(/with step \d+ \(charge\) of unknown outcome: check whether it took effect/);
  });

  it('a cancel during a slow read: the read (its started row written by a flush) is abandoned, not an unknown write', async () => {
    const h = harness();
    const other = h.other();
    let taskId = 0;
    h.tools.register(defineTool({ name: 'put', description: 'A write.', kind: 'write', args: z.object({ n: z.int() }), execute: async ({ n }) => ({ n }) }));
    h.tools.register(defineTool({
      name: 'slow_look', description: 'A slow read.', kind: 'read', args: z.object({}),
      // Past the journal's flush (20 ms), so its started row is on the file; then the cancel.
      execute: async (_a, ctx) => {
        await sleep(80);
        await other.tm.cancelTask({ taskId, actor: operatorActor });
        await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted'))));
      },
    }));
    const claim = await claimWith(h, card({
      allowed_tools: ['put', 'slow_look'],
      script: [{ action: 'tool', tool: 'put', args: { n: 1 } }, { action: 'tool', tool: 'slow_look', args: {} }, { action: 'done' }],
    }));
    taskId = claim.id;
    await expect(drive(loopContext(h, claim))).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    const [ended] = await h.runs.runsOf(claim.id);
    const run = await h.runs.getRun(ended!.id);
    expect(run.steps.find((s) => s.tool === 'slow_look')).toMatchObject({ status: 'abandoned', error: expect.stringContaining('while the call was running') });
    expect((run.envelope as { side_effects: unknown[] }).side_effects).toEqual([{ tool: 'put', args: { n: 1 }, seq: expect.any(Number), status: 'done' }]);
    expect((run.envelope as { safe_resume: { condition: string } }).safe_resume.condition).toMatch(/^none: the task was cancelled outside its run; its steps are the record$/);
  });

  it('its daemon gone on the last attempt: the sweep fails the task, and the write it had begun is listed, not lost', async () => {
    const h = harness();
    h.tools.register(defineTool({
      name: 'charge', description: 'A write.', kind: 'write', args: z.object({ amount: z.int() }),
      // The daemon "dies" in the call: it never answers (its signal is the test's way out).
      execute: async (_a, ctx) => new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted')))),
    }));
    const c = card({ allowed_tools: ['charge'], script: [{ action: 'tool', tool: 'charge', args: { amount: 7 } }, { action: 'done' }] });
    const task = (await h.tm.createTask({ title: 'last try', card: c, maxAttempts: 1 }, operatorActor)).task;
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true, leaseMs: 100 }))!;
    const run = drive(loopContext(h, claim), () => undefined).catch((err: unknown) => err);
    await waitFor(async () => (await h.runs.runsOf(task.id)).length === 1 && (await h.runs.getRun((await h.runs.runsOf(task.id))[0]!.id)).steps.some((s) => s.tool === 'charge'), 5000, 'the charge to begin');
    await waitFor(async () => (await h.other().tm.sweep({ graceMs: 0 })).failed.includes(task.id), 5000, 'the sweep to fail the task');
    await run;
    const [ended] = await h.runs.runsOf(task.id);
    const got = await h.runs.getRun(ended!.id);
    expect(got.steps.find((s) => s.tool === 'charge')).toMatchObject({ status: 'unknown' });
    // Before: side_effects [] and the step left started, though no run of this task will ever ask.
    expect(got.envelope).toMatchObject({ phase: 'failed', stop_reason: 'task_failed', side_effects: [{ tool: 'charge', args: { amount: 7 }, status: 'unknown' }] });
  });
});
