import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, createSqliteStore } from '../../src/engine/index.js';
import { CLEAN_FOR_MS } from '../../src/engine/sqlite/breakers.js';
import { POLICY, card, harness, runCard } from './harness.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { builtInTools } from '../../src/tools/builtin.js';
import { fakeClock, tempDir } from '../helpers.js';
import { onTestFinished, vi } from 'vitest';

describe('the tool circuit breaker', () => {
  it('opens after 3 consecutive failures of a tool, shared across runs: the next run ends failed / breaker', async () => {
    const h = harness();
    const first = await runCard(h, card({ allowed_tools: ['broken'], script: [1, 2, 3].map((n) => ({ action: 'tool', tool: 'broken', args: { n } })) }));
    expect(first.result).toMatchObject({ phase: 'failed', stopReason: 'max_failures' });
    expect((await h.runs.breakers()).find((b) => b.tool === 'broken')).toMatchObject({ state: 'open', failures: 3 });

    const other = h.other();
    const second = await runCard({ ...h, runs: other.runs, tm: other.tm }, card({ allowed_tools: ['broken'], script: [{ action: 'tool', tool: 'broken', args: { n: 9 } }] }));
    expect(second.result).toMatchObject({ phase: 'failed', stopReason: 'breaker' });
    const rejected = second.result.envelope!.trace.rejected_calls;
    expect(rejected[0]!.reason).toMatch(/tool broken is tripped \(breaker open\)/);
    const types = (await h.tm.getTask(first.claim.id)).events.map((e) => e.type);
    expect(types).toContain('breaker.opened');
  });

  it("an agent's calls refused for what it asked (ids that name nothing) are not counted on the shared breaker: the next run still calls the tool", async () => {
    const h = harness();
    await ticketStoreFor(h.tm.store).seed();
    // A hostile card asks, over the threshold, for tickets and a task that do not exist.
    const missing = ['T-9991', 'T-9992', 'T-9993'].map((id) => ({ action: 'tool', tool: 'get_ticket', args: { ticket_id: id } }));
    const nothing = [999_998, 999_999].map((id) => ({ action: 'tool', tool: 'task_get', args: { task_id: id } }));
    const hostile = await runCard(h, card({ allowed_tools: ['get_ticket', 'task_get'], budget: { max_steps: 20, max_failures: 10 }, script: [...missing, ...nothing, { action: 'done' }] }));
    const failed = hostile.events.flatMap((e) => (e.type === 'step_finished' && e.step.kind === 'action' ? [e.step] : []));
    expect(failed.map((s) => s.status)).toEqual(Array(5).fill('failed'));
    expect(failed[0]!.error).toMatch(/^get_ticket: VALIDATION_FAILED: no ticket T-9991/);
    expect(failed[4]!.error).toMatch(/^task_get: TASK_NOT_FOUND/);
    // Its own run counted them (toward its max_failures); the tools' breakers heard nothing.
    expect(hostile.result.envelope!.progress).toMatchObject({ consecutive_failures: 5 });
    expect((await h.runs.breakers()).filter((b) => b.failures > 0 || b.state !== 'closed')).toEqual([]);

    const other = h.other();
    const victim = await runCard({ ...h, runs: other.runs, tm: other.tm }, card({ allowed_tools: ['get_ticket'], script: [{ action: 'tool', tool: 'get_ticket', args: { ticket_id: 'T-1024' } }, { action: 'done' }] }));
    expect(victim.result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
  });

  it('a wait asked for in full is no timeout of the tool: its own timeout is above its longest wait', async () => {
    const wait = builtInTools().find((t) => t.name === 'wait')!;
    expect(wait.parse({ ms: 600_000 })).toEqual({ ms: 600_000 });
    expect(() => wait.parse({ ms: 600_001 })).toThrow();
    expect(wait.timeoutMs).toBeGreaterThan(600_000);
  });

  it('half-opens after the cooldown with exactly one probe across all connections; success closes it', async () => {
    const dir = tempDir();
    const clock = fakeClock();
    const stores = Array.from({ length: 4 }, () => createSqliteStore({ path: `${dir}/b.db`, now: clock.now }));
    onTestFinished(() => Promise.all(stores.map((s) => s.close())).then(() => undefined));
    const runStores = stores.map(createSqliteRunStore);
    for (let i = 0; i < 3; i++) await runStores[0]!.breakerRecord('flaky_api', false, POLICY);
    expect((await runStores[1]!.breakerAcquire('flaky_api', POLICY)).allowed).toBe(false);
    clock.advance(POLICY.cooldownMs);
    const verdicts = await Promise.all(runStores.map((r) => r.breakerAcquire('flaky_api', POLICY)));
    expect(verdicts.filter((v) => v.allowed)).toEqual([{ allowed: true, state: 'half_open', probe: true }]);
    // A probe that never reports back is presumed lost after its timeout: one more is granted.
    clock.advance(POLICY.probeTimeoutMs + 1);
    expect((await runStores[2]!.breakerAcquire('flaky_api', POLICY)).probe).toBe(true);
    expect(await runStores[2]!.breakerRecord('flaky_api', true, POLICY)).toBe('closed');
    expect((await runStores[3]!.breakerAcquire('flaky_api', POLICY))).toEqual({ allowed: true, state: 'closed', probe: false });
  });

  it('a clean read stands for CLEAN_FOR_MS on its connection: another connection\'s opening is honoured once that has passed, this connection\'s own at once', async () => {
    // The window runs on performance.now(): held still here, so the test does not depend on how fast the machine is.
    let t = 1_000;
    vi.spyOn(performance, 'now').mockImplementation(() => t);
    onTestFinished(() => void vi.restoreAllMocks());
    const dir = tempDir();
    const [a, b] = [createSqliteStore({ path: `${dir}/b.db` }), createSqliteStore({ path: `${dir}/b.db` })];
    onTestFinished(() => Promise.all([a.close(), b.close()]).then(() => undefined));
    const [ra, rb] = [createSqliteRunStore(a), createSqliteRunStore(b)];
    expect(await ra.breakerAcquire('flaky_api', POLICY)).toEqual({ allowed: true, state: 'closed', probe: false });
    for (let i = 0; i < 3; i++) await rb.breakerRecord('flaky_api', false, POLICY);
    // Within the window the kept read answers (what the 2 ms allows), and not a moment longer.
    t += CLEAN_FOR_MS - 0.001;
    expect((await ra.breakerAcquire('flaky_api', POLICY)).allowed).toBe(true);
    t += 0.001;
    expect(await ra.breakerAcquire('flaky_api', POLICY)).toEqual({ allowed: false, state: 'open', probe: false });
    // Its own failures open it for its very next call, time standing still.
    expect((await ra.breakerAcquire('other_api', POLICY)).allowed).toBe(true);
    for (let i = 0; i < 3; i++) await ra.breakerRecord('other_api', false, POLICY);
    expect(await ra.breakerAcquire('other_api', POLICY)).toEqual({ allowed: false, state: 'open', probe: false });
    // A success read from the kept verdict writes nothing: the failure another connection counted stays counted.
    expect((await ra.breakerAcquire('third_api', POLICY)).allowed).toBe(true);
    await rb.breakerRecord('third_api', false, POLICY);
    expect(await ra.breakerRecord('third_api', true, POLICY)).toBe('closed');
    expect((await rb.breakers()).find((x) => x.tool === 'third_api')).toMatchObject({ state: 'closed', failures: 1 });
  });

  it('a failed probe re-opens the breaker for another cooldown', async () => {
    const dir = tempDir();
    const clock = fakeClock();
    const store = createSqliteStore({ path: `${dir}/b.db`, now: clock.now });
    onTestFinished(() => store.close());
    const runs = createSqliteRunStore(store);
    for (let i = 0; i < 3; i++) await runs.breakerRecord('t', false, POLICY);
    clock.advance(POLICY.cooldownMs);
    expect((await runs.breakerAcquire('t', POLICY)).probe).toBe(true);
    expect(await runs.breakerRecord('t', false, POLICY)).toBe('open');
    clock.advance(POLICY.cooldownMs - 1);
    expect((await runs.breakerAcquire('t', POLICY)).allowed).toBe(false);
  });
});
