/** The board's incremental reads, GET /api/tasks/:id?events_after= and GET /api/runs/:id?steps_after=, attacked. */
import { describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/engine/index.js';
import { card as loopCard, drive, harness, loopContext } from '../workers/harness.js';
import { api, bearer, startServer } from './http-helpers.js';

const OP = 'operator-token-0123456789';
const CLAUDE = 'claude-token-0123456789a';
const MALLORY = 'mallory-token-012345678';

describe('incremental reads of a task and a run', () => {
  it('send only what lies past the cursor; refuse a bad cursor with VALIDATION_FAILED; and read nothing of a task the caller may not read', async () => {
    const h = harness();
    const claude = { id: 'claude', role: 'agent' as const };
    const { task } = await h.tm.createTask({ title: 'claude’s', card: loopCard({ script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }] }) }, claude);
    const claim = (await h.tm.claimTask({ agent: 'claude', start: true }))!;
    const { result } = await drive(loopContext(h, claim));
    const tokens = new Map([[OP, OPERATOR], [CLAUDE, claude], [MALLORY, { id: 'mallory', role: 'agent' as const }]]);
    const { url } = await startServer({ path: h.path, tokens });
    const op = { url, headers: bearer(OP) };

    const all = (await api(op, 'GET', `/api/tasks/${task.id}`)).json;
    const cursor = all.events[2].id as number;
    const past = (await api(op, 'GET', `/api/tasks/${task.id}?events_after=${cursor}`)).json;
    expect(past.events.map((e: { id: number }) => e.id)).toEqual(all.events.slice(3).map((e: { id: number }) => e.id));
    expect(past).toMatchObject({ id: task.id, state: 'completed', runs: [{ id: result.runId }] });
    expect((await api(op, 'GET', `/api/tasks/${task.id}?events_after=${all.events.at(-1).id}`)).json.events).toEqual([]);

    const run = (await api(op, 'GET', `/api/runs/${result.runId}`)).json;
    expect(run.steps.length).toBeGreaterThan(2);
    const later = (await api(op, 'GET', `/api/runs/${result.runId}?steps_after=2`)).json;
    expect(later.steps.map((s: { seq: number }) => s.seq)).toEqual(run.steps.filter((s: { seq: number }) => s.seq > 2).map((s: { seq: number }) => s.seq));
    expect(later.phase).toBe('completed');

    for (const bad of ['-1', '1e3', 'abc', '', '9999999999999999', '1&events_after=2 OR 1=1']) {
      for (const path of [`/api/tasks/${task.id}?events_after=${encodeURIComponent(bad)}`, `/api/runs/${result.runId}?steps_after=${encodeURIComponent(bad)}`]) {
        const r = await api(op, 'GET', path);
        expect(r.status, path).toBe(400);
        expect(r.json.error.code, path).toBe('VALIDATION_FAILED');
      }
    }
    const unknown = await api(op, 'GET', `/api/tasks/${task.id}?include=everything`);
    expect(unknown.status).toBe(400);

    // Another agent: the cursor is no way around the read rule.
    const mallory = { url, headers: bearer(MALLORY) };
    for (const path of [`/api/tasks/${task.id}?events_after=0`, `/api/runs/${result.runId}?steps_after=0`]) {
      const r = await api(mallory, 'GET', path);
      expect(r.status, path).toBe(403);
      expect(r.json.error.code).toBe('FORBIDDEN');
      expect(JSON.stringify(r.json)).not.toContain('step');
    }
    // Its creator may read it incrementally too.
    expect((await api({ url, headers: bearer(CLAUDE) }, 'GET', `/api/tasks/${task.id}?events_after=${cursor}`)).json.events).toHaveLength(past.events.length);
  });
});
