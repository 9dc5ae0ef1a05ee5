/**
 * A run keeps the latest screen it observed (a tool declared `image: true` returns it), so
 * an operator can see what the agent last saw: over the run store, over HTTP, and gone with
 * retention. The screens here are small PNGs drawn by a test tool, no display needed.
 */
import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';
import { fakeScreenTool, shadePng } from '../fixtures/fake-screen.js';
import { OPERATOR } from '../../src/engine/index.js';
import { api, openStream, startServer } from '../monitor/http-helpers.js';
import { card, harness, runCard } from './harness.js';

const { tool: fakeScreen, calls } = fakeScreenTool();

describe('the screen a run observed', () => {
  it('keeps the latest observed screen per run, out of the step log, served as image/png, and dropped by retention', async () => {
    const h = harness();
    h.tools.register(fakeScreen);
    const { result } = await runCard(h, card({
      allowed_tools: ['fake_screen', 'noop'],
      observe: { tool: 'fake_screen', args: {} },
      script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'noop' }, { action: 'done' }],
    }));
    expect(result.phase).toBe('completed');
    const run = await h.runs.getRun(result.runId);
    const observes = run.steps.filter((s) => s.kind === 'observe');
    expect(observes).toHaveLength(3);
    // The step log holds a note, never the image.
    expect(observes.every((s) => /^\(PNG of \d+ bytes kept out of the log/.test((s.result as { image_png: string }).image_png))).toBe(true);
    const last = observes.at(-1)!;
    expect(run.screen).toMatchObject({ seq: last.seq, bytes: expect.any(Number) });
    const screen = (await h.runs.getScreen(result.runId))!;
    expect(screen.png.toString('base64')).toBe(shadePng(10 * calls()));
    expect(PNG.sync.read(screen.png).data[0]).toBe(10 * calls());

    const { url, op, auth } = await startServer({ path: h.path });
    const wire = await api(op, 'GET', `/api/runs/${result.runId}`);
    expect(wire.json.screen).toEqual({ seq: last.seq, taken_at: expect.any(String), bytes: screen.png.length, url: `/api/runs/${result.runId}/screen` });
    const res = await fetch(`${url}/api/runs/${result.runId}/screen`, { headers: auth });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('x-screen-seq')).toBe(String(last.seq));
    expect(Buffer.from(await res.arrayBuffer()).equals(screen.png)).toBe(true);

    // A run that observed nothing has no screen; a run that does not exist is RUN_NOT_FOUND.
    const plain = await runCard(h, card());
    expect((await api(op, 'GET', `/api/runs/${plain.result.runId}`)).json.screen).toBeNull();
    expect((await api(op, 'GET', `/api/runs/${plain.result.runId}/screen`)).json.error.code).toBe('NOT_FOUND');
    expect((await api(op, 'GET', '/api/runs/9999/screen')).json.error.code).toBe('RUN_NOT_FOUND');

    expect(await h.runs.compact(Date.now() + 1000)).toBe(2);
    expect(await h.runs.getScreen(result.runId)).toBeNull();
  });

  it('an agent that may only claim a released desktop task sees neither its run nor its screens, nor once it holds it; an operator sees both', async () => {
    const h = harness();
    h.tools.register(fakeScreen);
    const before = calls();
    // The run observes once, then its daemon drains: the task goes back to pending, readable by any agent.
    const { result } = await runCard(h, card({
      allowed_tools: ['fake_screen', 'echo'],
      observe: { tool: 'fake_screen', args: {} },
      script: [{ action: 'tool', tool: 'echo', args: { text: 'SECRET-STEP-RESULT' } }, { action: 'done' }],
    }), { draining: () => calls() > before });
    expect(result.phase).toBe('released');
    expect((await h.tm.getTask(result.taskId)).state).toBe('pending');
    const OP = 'operator-token-0123456789';
    const MALLORY = 'mallory-token-012345678';
    const { url } = await startServer({ path: h.path, tokens: new Map([[OP, OPERATOR], [MALLORY, { id: 'mallory', role: 'agent' as const }]]) });
    const as = (token: string) => ({ url, headers: { authorization: `Bearer ${token}` } });
    // She may read the task (she may claim it), but not its run: the steps are the operator's work.
    const task = await api(as(MALLORY), 'GET', `/api/tasks/${result.taskId}`);
    expect([task.status, task.json.runs]).toEqual([200, []]);
    const run = await api(as(MALLORY), 'GET', `/api/runs/${result.runId}`);
    expect([run.status, run.json.error.code]).toEqual([403, 'FORBIDDEN']);
    const image = await api(as(MALLORY), 'GET', `/api/runs/${result.runId}/screen`);
    expect([image.status, image.json.error.code]).toEqual([403, 'FORBIDDEN']);
    // Its event stream carries the log's rows, not the steps' arguments and results.
    const stream = await openStream(`${url}/api/tasks/${result.taskId}/events`, as(MALLORY).headers);
    expect([stream.status, stream.error]).toEqual([200, undefined]);
    const last = (await h.tm.getTask(result.taskId)).events.at(-1)!.id;
    await stream.next((e) => e.id === last, 'the release, the last row');
    stream.close();
    expect(stream.events.some((e) => e.event === 'step_finished')).toBe(true);
    expect(JSON.stringify(stream.events)).not.toContain('SECRET-STEP-RESULT');

    // Any agent may claim it, so holding it shows her no more: neither the run nor the screen.
    await h.tm.claimTask({ agent: 'mallory', taskId: result.taskId });
    expect((await api(as(MALLORY), 'GET', `/api/runs/${result.runId}`)).status).toBe(403);
    expect((await api(as(MALLORY), 'GET', `/api/runs/${result.runId}/screen`)).status).toBe(403);
    // Nor may she ask an approval's state by deciding it, or watch the log's pace through the list's cursor.
    const decide = await api(as(MALLORY), 'POST', '/api/approvals/1/approve', {});
    expect([decide.status, decide.json.error.code]).toEqual([403, 'FORBIDDEN']);
    expect((await api(as(MALLORY), 'GET', '/api/tasks')).json.last_event_id).toBeNull();
    expect((await api(as(OP), 'GET', '/api/tasks')).json.last_event_id).toEqual(expect.any(Number));
    // The operator sees both.
    expect((await api(as(OP), 'GET', `/api/runs/${result.runId}`)).json.screen).toMatchObject({ url: `/api/runs/${result.runId}/screen` });
    expect((await fetch(`${url}/api/runs/${result.runId}/screen`, { headers: as(OP).headers })).status).toBe(200);
  });
});
