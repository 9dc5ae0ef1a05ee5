/**
 * A delay is a power over everyone's claims. A claim reads its queue's claimable tasks in
 * claim order, and a task whose run_after is still ahead is in that order like any other: the
 * claim steps over it. The HTTP API (with an agent's token) and the library took run_after
 * from anyone, so an agent that created 25,000 tasks due in the year 2100 made every claim in
 * its queue ~6 ms, inside SQLite's write lock (session 30's review; MCP's task_create never
 * offered run_after). An agent's task is now due when it is created (authority.ts mayDelay).
 *
 * Attacked through the TaskManager (both stores), one bad item in a batch, and the HTTP API
 * with an agent's token.
 */
import { describe, expect, it } from 'vitest';
import { type Actor, OPERATOR } from '../../src/engine/index.js';
import { api, bearer, startServer } from '../monitor/http-helpers.js';
import { agent, freshManager, operator } from '../helpers.js';

const refusal = (p: Promise<unknown>) => p.then(() => null, (e: { code?: string; message?: string }) => e);
const YEAR_2100 = Date.UTC(2100, 0, 1);

describe('an agent may not delay a task', () => {
  it('the TaskManager refuses an agent’s run_after with FORBIDDEN in one line, a batch with one whole, and writes nothing', async () => {
    const tm = freshManager();
    for (const runAfter of [YEAR_2100, 1, 0]) {
      const err = await refusal(tm.createTask({ title: 'later', runAfter }, agent('mallory')));
      expect(err, `run_after ${runAfter}`).toMatchObject({ code: 'FORBIDDEN' });
      expect(err!.message).toMatch(/^run_after: delaying a task is an operator's power/);
      expect(err!.message).not.toContain('\n');
    }
    const batch = await refusal(tm.createTasks([{ title: 'now' }, { title: 'later', runAfter: YEAR_2100, idempotencyKey: 'k' }, { title: 'now too' }], agent('mallory')));
    expect(batch).toMatchObject({ code: 'FORBIDDEN' });
    expect((await tm.stats()).lastEventId).toBe(0);
    expect(await tm.findTasks({})).toEqual([]);
    // Without run_after an agent's task is due at once, and claimable.
    const { task } = await tm.createTask({ title: 'now' }, agent('mallory'));
    expect(task.runAfter).toBe(task.createdAt);
    expect((await tm.claimTask({ agent: 'worker' }))?.id).toBe(task.id);
  });

  it('operators, reviewers and the system delay tasks; the claim waits for them', async () => {
    const tm = freshManager();
    const people: Actor[] = [operator, { id: 'rita', role: 'reviewer' }, { id: 'scheduler', role: 'system' }];
    for (const who of people) {
      expect((await tm.createTask({ title: `${who.role}'s`, runAfter: YEAR_2100 }, who)).task.runAfter, who.role).toBe(YEAR_2100);
    }
    expect(await tm.claimTask({ agent: 'worker' })).toBeNull();
  });

  it('over HTTP: an agent’s token with run_after is refused 403 and nothing is created; the operator’s is created', async () => {
    const OP = 'operator-token-0123456789';
    const MALLORY = 'mallory-token-012345678';
    const { url, tm } = await startServer({ tokens: new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]) });
    const body = { title: 'in the year 2100', attach: false, run_after: '2100-01-01T00:00:00Z' };
    const refused = await api({ url, headers: bearer(MALLORY) }, 'POST', '/api/tasks', body);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe('FORBIDDEN');
    expect(refused.json.error.message).toMatch(/^run_after: /);
    expect(await tm.findTasks({})).toEqual([]);
    const created = await api({ url, headers: bearer(OP) }, 'POST', '/api/tasks', body);
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ run_after: '2100-01-01T00:00:00.000Z' });
  });
});
