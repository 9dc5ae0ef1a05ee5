/**
 * "One gate for every call" (README): allowlist → arguments → scope → budget → breaker →
 * tool_before hooks → approval. The card's own calls do not pass it: the `observe` call
 * (src/workers/loop.ts, `exec(tool, args)` at "observe") and the `final_state` reads of
 * acceptance (runAcceptance's `read`) call the tool directly. A card author picks their
 * arguments, so whatever a tool_before policy refuses for a read (a ticket, a path, a
 * customer), the card gets by naming it under `observe` or `final_state`; and an open
 * breaker does not stop the observe call — its success even closes the breaker again.
 */
import { describe, expect, it } from 'vitest';
import { type Plugin, createHookRegistry } from '../../src/plugins/hooks.js';
import { agent } from '../helpers.js';
import { POLICY, card, drive, harness, loopContext } from '../workers/harness.js';

async function blockingEcho(seen: string[]) {
  const hooks = createHookRegistry();
  const plugin: Plugin = {
    name: 'dlp',
    register: (api) => api.on('tool_before', (c) => {
      seen.push(`${c.tool}:${JSON.stringify(c.args)}`);
      return c.tool === 'echo' ? { block: 'echo is not allowed' } : undefined;
    }),
  };
  await hooks.use(plugin);
  hooks.close();
  return hooks;
}

describe('the card’s own calls pass the gate', () => {
  it('the observe call is refused by a tool_before hook that refuses it', async () => {
    const h = harness();
    const seen: string[] = [];
    const hooks = await blockingEcho(seen);
    await h.tm.createTask({
      title: 'observe',
      card: card({ allowed_tools: ['echo', 'noop'], observe: { tool: 'echo', args: { text: 'PAST-THE-HOOK' } }, script: [{ action: 'done' }] }),
    }, agent('mallory'));
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    await drive(loopContext(h, claim, { hooks }));

    const steps = (await h.runs.getRun(1)).steps;
    expect(steps.filter((s) => s.kind === 'observe' && s.status === 'ok')).toEqual([]);
    expect(JSON.stringify(steps.map((s) => s.result))).not.toContain('PAST-THE-HOOK');
  });

  it('a final_state read is refused by a tool_before hook that refuses it, and the run does not complete on it', async () => {
    const h = harness();
    const seen: string[] = [];
    const hooks = await blockingEcho(seen);
    await h.tm.createTask({
      title: 'final state',
      card: card({
        allowed_tools: ['echo', 'noop'],
        final_state: { f: { tool: 'echo', args: { text: 'PAST-THE-HOOK' } } },
        acceptance: { checks: [{ id: 'read', path: 'f.text', equals: 'PAST-THE-HOOK' }] },
        script: [{ action: 'done' }],
      }),
    }, agent('mallory'));
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    const { result } = await drive(loopContext(h, claim, { hooks }));

    expect((result.envelope!.acceptance as { final_state?: object } | null)?.final_state ?? {}).not.toHaveProperty('f');
    expect(result.phase).not.toBe('completed');
  });

  it('an open breaker stops the observe call, and only a granted probe closes it', async () => {
    const h = harness();
    for (let i = 0; i < POLICY.threshold; i++) await h.runs.breakerRecord('echo', false, POLICY);
    expect((await h.runs.breakerAcquire('echo', POLICY)).allowed).toBe(false);
    await h.tm.createTask({
      title: 'observe',
      card: card({ allowed_tools: ['echo', 'noop'], observe: { tool: 'echo', args: { text: 'x' } }, script: [{ action: 'done' }] }),
    }, agent('mallory'));
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    await drive(loopContext(h, claim));

    const steps = (await h.runs.getRun(1)).steps;
    expect(steps.filter((s) => s.kind === 'observe' && s.status === 'ok')).toEqual([]);
    expect((await h.runs.breakers()).find((b) => b.tool === 'echo')).toMatchObject({ state: 'open' });
  });
});
