import { describe, expect, it } from 'vitest';
import { createHookRegistry, type Plugin } from '../../src/plugins/hooks.js';
import { card, drive, harness, loopContext, runCard } from '../workers/harness.js';

/** Seed 002's methodology check, in miniature: a reason citing "method:" passes, "method" alone is weak, else blocked. */
function methodology(resets: string[]): Plugin {
  let answers = 0;
  return {
    name: 'methodology',
    register(api) {
      api.verifier(({ decision }) => {
        answers++;
        if (decision.reason.includes('method:')) return { score: 2 };
        return decision.reason.includes('method') ? { score: 1, reason: 'keyword filler' } : { score: 0, reason: 'no method cited' };
      });
      api.on('session_reset', (e) => {
        resets.push(`${e.reason} after ${answers} answers`);
        answers = 0;
      });
    },
  };
}

const step = (reason: string) => ({ action: 'tool', tool: 'noop', reason });
const done = (reason: string) => ({ action: 'done', reason });

async function hooksWith(plugin: Plugin) {
  const hooks = createHookRegistry();
  await hooks.use(plugin);
  hooks.close();
  return hooks;
}

describe('the restart policy', () => {
  it('two blocked answers restart the run with cleared memory; passing answers then complete it', async () => {
    const h = harness();
    const resets: string[] = [];
    const { result, claim } = await runCard(h, card({
      script: [step('just do it'), step('trust me'), step('method: observe then act'), done('method: verified')],
    }), { hooks: await hooksWith(methodology(resets)) });
    expect(result).toMatchObject({ phase: 'completed' });
    expect(resets).toEqual(['two answers were blocked after 2 answers']);
    const [run] = await h.runs.runsOf(claim.id);
    expect(run!.restarts).toBe(1);
    expect(result.envelope!.trace.used_tools).toEqual(['noop']); // the blocked answers were never acted on
    expect((await h.tm.getTask(claim.id)).events.map((e) => e.type)).toContain('run.restarted');
  });

  it('three weak answers restart too', async () => {
    const h = harness();
    const resets: string[] = [];
    const { result } = await runCard(h, card({ script: [step('a method'), step('my method'), step('some method'), done('method: ok')] }), { hooks: await hooksWith(methodology(resets)) });
    expect(resets).toEqual(['three answers were weak after 3 answers']);
    expect(result.phase).toBe('completed');
  });

  it('after 3 restarts the run waits for input, with the reason, the requirements and the original goal', async () => {
    const h = harness();
    const script = [...Array.from({ length: 8 }, () => step('no')), done('method: checked')];
    const hooks = await hooksWith(methodology([]));
    const { result, claim } = await runCard(h, card({ goal: 'summarise the incident', budget: { max_steps: 20 }, script }), { hooks });
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'restart_limit' });
    expect(result.envelope!.message).toMatch(/stopped after 3 restarts\. Reason: two answers were blocked \(no method cited\)\. Requirements: every answer must pass verifier methodology.*Original goal: summarise the incident/);
    expect((await h.runs.runsOf(claim.id))[0]!.restarts).toBe(4);
    expect((await h.tm.getTask(claim.id)).state).toBe('waiting');
    expect(result.envelope!.safe_resume.condition).toContain(`taskloop task resume ${claim.id}`);

    // Resumed, it is the same run: the planner goes on from its ninth decision, the budgets keep counting.
    await h.runs.resumeRun({ taskId: claim.id, actor: { id: 'operator', role: 'operator' }, reason: 'cite your method' });
    const resumed = await drive(loopContext(h, (await h.tm.claimTask({ agent: 'worker', start: true }))!, { hooks }));
    expect(resumed.result).toMatchObject({ runId: result.runId, phase: 'completed', stopReason: 'accepted' });
    const runs = await h.runs.runsOf(claim.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]!.usage.steps).toBe(9);
  });

  it('a verifier that throws blocks the answer (fails closed)', async () => {
    const h = harness();
    const broken: Plugin = { name: 'flaky_verifier', register: (api) => api.verifier(() => { throw new Error('model down'); }) };
    const { result } = await runCard(h, card({ script: [step('a'), step('b'), step('c'), step('d'), step('e'), step('f'), step('g'), step('h'), step('i')] }), { hooks: await hooksWith(broken) });
    expect(result).toMatchObject({ phase: 'waiting_input', stopReason: 'restart_limit' });
    expect(result.envelope!.trace.used_tools).toEqual([]);
  });
});
