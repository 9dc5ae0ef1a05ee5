/**
 * Controls are a person's brake. The README's authority table lets an agent "cancel, stop or
 * pause the tasks it created"; authority.ts mayControl lets the creator *resume* too, and
 * controls.ts does not remember who paused. So when an operator pauses an agent's task
 * (to look at what its run is doing), the agent lifts the pause at once, over HTTP
 * (POST /api/tasks/:id/resume with its token) or through the library.
 *
 * Correct behaviour: an agent may not lift a pause it did not set (FORBIDDEN, the control
 * stays `paused`).
 */
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { api, bearer, startServer, waitCard } from '../monitor/http-helpers.js';

const OP = 'operator-token-0123456789';
const MALLORY = 'mallory-token-012345678';
const tokens = () => new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]);

describe('an operator’s pause', () => {
  it('is not lifted by the agent whose task it paused', async () => {
    const { url, runs, tm } = await startServer({ tokens: tokens() });
    const op = { url, headers: bearer(OP) };
    const mallory = { url, headers: bearer(MALLORY) };
    const id = (await api(mallory, 'POST', '/api/tasks', { title: 'mine', card: waitCard(), attach: false })).json.id as number;
    // A daemon has it (claimed, running); the operator pauses it.
    await tm.claimTask({ agent: 'worker', start: true });
    const paused = await api(op, 'POST', `/api/tasks/${id}/pause`, { reason: 'looking into it' });
    expect(paused.status).toBe(200);
    expect(await runs.getControl(id)).toBe('paused');

    const lifted = await api(mallory, 'POST', `/api/tasks/${id}/resume`, {});
    expect(lifted.status).toBe(403);
    expect(lifted.json.error.code).toBe('FORBIDDEN');
    expect(await runs.getControl(id)).toBe('paused');
  });
});
