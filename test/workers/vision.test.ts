/**
 * Seed 000's vision check: an llm card that observes by screenshot needs a model that can
 * see images. Refused before the run starts otherwise; with one, the screenshot reaches the
 * model as an image part (the real openai client, a local chat-completions server, Xvfb).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { visionRefusal } from '../../src/workers/card-check.js';
import { createLlmPlanner } from '../../src/workers/planners/llm.js';
import { DEFAULT_VISION_MODELS, hasVision } from '../../src/workers/planners/models.js';
import { checkCard, type TaskCard } from '../../src/engine/index.js';
import { startOpenAiServer } from '../fixtures/openai-server.js';
import { startXvfb, type Xvfb } from '../fixtures/xvfb.js';
import { cli } from '../cli/helpers.js';
import { api, createAttached, openStream, startServer } from '../monitor/http-helpers.js';
import { tempDir } from '../helpers.js';
import { portsOf } from '../stores.js';
import { harness, runCard } from './harness.js';

const desktopCard = (over: Record<string, unknown> = {}) => ({
  goal: 'look at the screen',
  planner: 'llm',
  allowed_tools: ['screen_snapshot'],
  observe: { tool: 'screen_snapshot', args: {} },
  budget: { max_steps: 5 },
  acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
  ...over,
});
const parsed = (raw: Record<string, unknown>): TaskCard => {
  const c = checkCard(raw);
  if (!c.ok) throw new Error(c.problems.join('; '));
  return c.card;
};

describe('which models have vision', () => {
  it('defaults to the known vision families; TASKLOOP_VISION_MODELS replaces them', () => {
    expect(hasVision('gpt-4o-mini', {})).toBe(true);
    expect(hasVision('qwen2.5vl:7b', {})).toBe(true);
    expect(hasVision('llama3:8b', {})).toBe(false);
    expect(hasVision('o3-mini', {})).toBe(false);
    expect(hasVision('o4-mini', {})).toBe(true);
    expect(DEFAULT_VISION_MODELS).toContain('gpt-4o*');
    const env = { TASKLOOP_VISION_MODELS: 'my-vlm, llama3:8b' };
    expect(hasVision('llama3:8b', env)).toBe(true);
    expect(hasVision('my-vlm', env)).toBe(true);
    expect(hasVision('my-vlm-2', env)).toBe(false);
    expect(hasVision('gpt-4o', env)).toBe(false);
    expect(hasVision('gpt-4o', { TASKLOOP_VISION_MODELS: '' })).toBe(false);
  });

  it('only an llm card with a screenshot tool needs one; TASKLOOP_MODEL counts when the card names none', () => {
    const h = harness();
    expect(visionRefusal(parsed(desktopCard({ model: 'llama3:8b' })), h.tools, {})).toMatchObject({ code: 'MODEL_LACKS_VISION', data: { model: 'llama3:8b', tools: ['screen_snapshot'] } });
    expect(visionRefusal(parsed(desktopCard({ model: 'qwen2.5vl:7b' })), h.tools, {})).toBeNull();
    expect(visionRefusal(parsed(desktopCard({ planner: 'scripted', script: [{ action: 'done' }] })), h.tools, { TASKLOOP_VISION_MODELS: '' })).toBeNull();
    expect(visionRefusal(parsed(desktopCard({ allowed_tools: ['noop'], observe: undefined })), h.tools, { TASKLOOP_VISION_MODELS: '' })).toBeNull();
    expect(visionRefusal(parsed(desktopCard()), h.tools, { TASKLOOP_MODEL: 'llama3:8b' })?.code).toBe('MODEL_LACKS_VISION');
  });
});

describe('a run whose model lacks vision', () => {
  it('is refused before it starts: no step, no model call, the task failed', async () => {
    const server = await startOpenAiServer([]);
    const h = harness();
    const { result, events, claim } = await runCard(h, desktopCard({ model: 'llama3:8b' }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'test', model: c.model }),
    });
    expect(result).toMatchObject({ phase: 'rejected', stopReason: 'model_lacks_vision' });
    expect(result.envelope!.message).toMatch(/^MODEL_LACKS_VISION: model llama3:8b cannot see images, but screen_snapshot observes by screenshot/);
    expect(events.filter((e) => e.type === 'step_started')).toEqual([]);
    expect(server.requests).toHaveLength(0);
    expect((await h.tm.getTask(claim.id)).state).toBe('failed');
    await server.close();
  });

  it('`taskloop card check` refuses the card with MODEL_LACKS_VISION (exit 1, one line)', async () => {
    const dir = tempDir();
    const file = join(dir, 'card.json');
    writeFileSync(file, JSON.stringify(desktopCard({ model: 'llama3:8b' })));
    const r = await cli(join(dir, 'x.db'), 'card', 'check', file);
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/MODEL_LACKS_VISION.*model llama3:8b cannot see images/);
    writeFileSync(file, JSON.stringify(desktopCard({ model: 'qwen2.5vl:7b' })));
    expect((await cli(join(dir, 'x.db'), 'card', 'check', file)).code).toBe(0);
  });

  it('an event stream that would start its run answers 422 and leaves the task as it was', async () => {
    const { url, op, auth, tm } = await startServer();
    const id = await createAttached(op, desktopCard({ model: 'llama3:8b' }));
    const stream = await openStream(`${url}/api/tasks/${id}/events`, auth);
    expect(stream.status).toBe(422);
    expect(stream.error).toMatchObject({ error: { code: 'MODEL_LACKS_VISION', message: expect.stringContaining('llama3:8b') } });
    const task = await tm.getTask(id);
    expect(task.state).toBe('pending');
    expect(task.events.map((e) => e.type)).toEqual(['task.created']);
    expect((await api(op, 'GET', `/api/tasks/${id}`)).status).toBe(200);
  });
});

describe('a run whose model has vision, under Xvfb', () => {
  let x: Xvfb;
  beforeAll(async () => {
    x = await startXvfb({ from: 110 });
  });
  afterAll(() => x.stop());

  it('sends the screenshot to the model as an image part, and keeps it out of the step log', async () => {
    vi.stubEnv('DISPLAY', x.display);
    const server = await startOpenAiServer([{ json: { action: 'done', tool: null, args: null, reason: 'the screen is as expected' } }]);
    const h = harness();
    const { result, claim } = await runCard(h, desktopCard({ model: 'qwen2.5vl:7b' }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'test', model: c.model }),
    });
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    const [request] = server.requests as Array<{ messages: Array<{ role: string; content: unknown }> }>;
    const user = request!.messages.find((m) => m.role === 'user')!.content as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(user.map((p) => p.type)).toEqual(['text', 'image_url']);
    expect(user[0]!.text).toContain('A screenshot of the current screen is attached.');
    const url = user[1]!.image_url!.url;
    expect(url.startsWith('data:image/png;base64,')).toBe(true);
    const png = PNG.sync.read(Buffer.from(url.slice('data:image/png;base64,'.length), 'base64'));
    expect([png.width, png.height]).toEqual([640, 480]);
    // The step log keeps a note in place of the image.
    const { runs } = portsOf(h.tm);
    const [run] = await runs.runsOf(claim.id);
    const observe = (await runs.getRun(run!.id)).steps.find((s) => s.kind === 'observe')!;
    expect(observe).toMatchObject({ status: 'ok', tool: 'screen_snapshot', result: { width: 640, height: 480, image_png: expect.stringMatching(/^\(PNG of \d+ bytes kept out of the log/) } });
    await server.close();
  });
});
