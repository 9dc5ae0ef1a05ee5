import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { type DecideInput, type Planner, PlannerError, type StepSummary } from '../../src/workers/planner.js';
import { DECISION_JSON_SCHEMA, type LlmPlannerOptions, createLlmPlanner } from '../../src/workers/planners/llm.js';
import { type Behaviour, type OpenAiServer, startOpenAiServer } from '../fixtures/openai-server.js';
import { waitFor } from '../helpers.js';

/** A scripted OpenAI-compatible server, closed when the test finishes. */
async function serve(script: Behaviour[]): Promise<OpenAiServer> {
  const server = await startOpenAiServer(script);
  onTestFinished(() => server.close());
  return server;
}

const plannerFor = (server: OpenAiServer, opts: LlmPlannerOptions = {}): Planner =>
  createLlmPlanner({ baseURL: server.url, apiKey: 'test-key', model: 'test-model', ...opts });

const step = (seq: number, over: Partial<StepSummary> = {}): StepSummary => ({
  seq,
  kind: 'action',
  status: 'ok',
  tool: 'get_ticket',
  args: { ticket_id: 'T-1024' },
  result: `result of step ${seq}`,
  error: null,
  ...over,
});

function input(over: Partial<DecideInput> = {}): DecideInput {
  return {
    goal: 'Raise T-1024 to urgent and notify on-call',
    steps: [step(1, { kind: 'observe' }), step(2, { tool: 'notify_oncall', status: 'failed', result: null, error: 'pager down' })],
    observation: { tool: 'get_ticket', ok: true, data: { ticket: { id: 'T-1024', priority: 'low' } } },
    allowedTools: [
      {
        name: 'update_ticket_priority',
        description: 'Set the priority of a ticket.',
        kind: 'write',
        parameters: { type: 'object', properties: { ticket_id: { type: 'string' }, priority: { enum: ['low', 'urgent'] } } },
      },
    ],
    rejections: [{ tool: 'delete_ticket', reason: 'not in the allowed tools' }],
    signal: new AbortController().signal,
    ...over,
  };
}

/** The PlannerError a call rejects with (fails the test if it resolves or rejects otherwise). */
async function failure(call: Promise<unknown>): Promise<PlannerError> {
  const err = await call.then(
    () => new Error('expected the planner call to fail'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(PlannerError);
  return err as PlannerError;
}

const userText = (body: Record<string, unknown>): unknown => (body.messages as Array<{ content: unknown }>)[1]!.content;

const DONE = { action: 'done', tool: null, args: null, reason: 'the ticket is urgent' };

describe('the LLM planner', () => {
  it('turns a scripted answer into a Decision, sending temperature 0, max_tokens 1024, a strict json_schema and the whole context', async () => {
    const server = await serve([
      {
        json: { action: 'tool', tool: 'update_ticket_priority', args: '{"ticket_id":"T-1024","priority":"urgent"}', reason: 'raise it' },
        usage: { prompt_tokens: 1000, completion_tokens: 2000 },
      },
    ]);
    const planner = plannerFor(server, { price: { promptPer1k: 0.5, completionPer1k: 1.5 } });
    const result = await planner.decide(input());

    expect(planner.name).toBe('llm');
    expect(result.decision).toEqual({
      action: 'tool',
      tool: 'update_ticket_priority',
      args: { ticket_id: 'T-1024', priority: 'urgent' },
      reason: 'raise it',
    });
    expect(result.usage).toEqual({ promptTokens: 1000, completionTokens: 2000, cost: 3.5 });

    expect(server.requests).toHaveLength(1);
    const body = server.requests[0]!;
    expect(body).toMatchObject({
      model: 'test-model',
      temperature: 0,
      max_tokens: 1024,
      response_format: { type: 'json_schema', json_schema: { name: 'decision', strict: true, schema: DECISION_JSON_SCHEMA } },
    });
    const messages = body.messages as Array<{ role: string; content: unknown }>;
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[0]!.content).toContain('"action": "tool" | "done" | "fail"');
    const user = userText(body) as string;
    expect(user).toContain('Raise T-1024 to urgent and notify on-call');
    expect(user).toContain('#1 observe get_ticket ok {"ticket_id":"T-1024"} → result of step 1');
    expect(user).toContain('#2 action notify_oncall failed {"ticket_id":"T-1024"} → error: pager down');
    expect(user).toContain('{"tool":"get_ticket","ok":true,"data":{"ticket":{"id":"T-1024","priority":"low"}}}');
    expect(user).toContain('- update_ticket_priority (write): Set the priority of a ticket.');
    expect(user).toContain('"priority":{"enum":["low","urgent"]}');
    expect(user).toContain('- delete_ticket: not in the allowed tools');
  });

  it('summarises a long run: the last 30 steps, each result cut to 300 characters, the observation to 4 KB', async () => {
    const server = await serve([{ json: DONE }]);
    const steps = Array.from({ length: 40 }, (_, i) => step(i + 1, { result: `r${i + 1}:${'x'.repeat(1000)}` }));
    const observation = { tool: 'dump', ok: true, data: { blob: 'y'.repeat(20_000) } };
    const result = await plannerFor(server).decide(input({ steps, observation, rejections: [] }));
    expect(result.decision).toEqual({ action: 'done', reason: 'the ticket is urgent' });

    const user = userText(server.requests[0]!) as string;
    expect(user).toContain('(last 30 of 40)');
    expect(user).not.toContain('#10 action');
    expect(user).toContain('#11 action');
    expect(user).toContain('#40 action');
    expect(user).not.toContain('x'.repeat(301));
    expect(user).not.toContain('y'.repeat(4097));
    expect(user).not.toContain('Refused by the gate');
    expect(user.length).toBeLessThan(30 * 600 + 4096 + 2000);
  });

  it('reads the endpoint, key and model from the environment when the planner is created', async () => {
    const server = await serve([{ json: DONE }]);
    onTestFinished(() => void vi.unstubAllEnvs());
    vi.stubEnv('OPENAI_BASE_URL', server.url);
    vi.stubEnv('OPENAI_API_KEY', 'env-key');
    vi.stubEnv('TASKLOOP_MODEL', 'env-model');
    const planner = createLlmPlanner();
    vi.stubEnv('TASKLOOP_MODEL', 'changed-later');
    await planner.decide(input());
    expect(server.requests[0]!.model).toBe('env-model');
  });

  it('refuses to be created without an API key, naming the fix', () => {
    onTestFinished(() => void vi.unstubAllEnvs());
    vi.stubEnv('OPENAI_API_KEY', '');
    expect(() => createLlmPlanner({ baseURL: 'http://127.0.0.1:9/v1' })).toThrow(/apiKey: no API key: set OPENAI_API_KEY/);
  });

  it('sends the screenshot as an image part only when the model has vision', async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUg==';
    const observation = { tool: 'screen_snapshot', ok: true, data: { windows: ['Notepad'] }, imagePng: png };
    const server = await serve([{ json: DONE }, { json: DONE }]);
    await plannerFor(server, { vision: true }).decide(input({ observation }));
    await plannerFor(server, { vision: false }).decide(input({ observation }));

    const withVision = userText(server.requests[0]!) as Array<{ type: string; text?: string; image_url?: { url: string } }>;
    expect(withVision.map((p) => p.type)).toEqual(['text', 'image_url']);
    expect(withVision[1]!.image_url!.url).toBe(`data:image/png;base64,${png}`);
    expect(withVision[0]!.text).toContain('A screenshot of the current screen is attached.');
    expect(withVision[0]!.text).not.toContain(png);

    const without = userText(server.requests[1]!);
    expect(typeof without).toBe('string');
    expect(without).toContain('A screenshot was taken but this model cannot see images');
    expect(JSON.stringify(server.requests[1])).not.toContain(png);
  });

  it('accepts args sent as an object by a server that ignores strict mode, and no args as {}', async () => {
    const server = await serve([
      { json: { action: 'tool', tool: 'update_ticket_priority', args: { priority: 'urgent' }, reason: 'r' } },
      { json: { action: 'tool', tool: 'get_ticket', args: null, reason: 'look' } },
    ]);
    const planner = plannerFor(server);
    expect((await planner.decide(input())).decision).toMatchObject({ args: { priority: 'urgent' } });
    expect((await planner.decide(input())).decision).toEqual({ action: 'tool', tool: 'get_ticket', args: {}, reason: 'look' });
  });

  it.each<[string, Behaviour, RegExp]>([
    ['text that is not JSON', { content: 'Sure! {"action": "done"' }, /not JSON: "Sure! \{\\"action\\": \\"done\\""/],
    ['JSON cut at max_tokens', { content: '{"action": "to', finishReason: 'length' }, /not JSON \(cut at max_tokens\)/],
    ['args that encode an array', { json: { action: 'tool', tool: 't', args: '[1,2]', reason: 'r' } }, /args: args must be a JSON-encoded object/],
    ['args that are a number', { json: { action: 'tool', tool: 't', args: 5, reason: 'r' } }, /^llm planner: args: args must be a JSON-encoded object in /],
    ['an unknown action', { json: { action: 'explode', tool: null, args: null, reason: 'r' } }, /^llm planner: action: .* in "\{\\"action\\":\\"explode/],
    ['a tool decision without a tool name', { json: { action: 'tool', tool: '', args: '{}', reason: 'r' } }, /tool: a tool decision needs a non-empty tool name/],
    ['a missing reason', { json: { action: 'done', tool: null, args: null } }, /reason: /],
    ['a refusal', { refusal: 'I cannot help with that.' }, /the model refused: "I cannot help with that."/],
    ['an empty choices list', { noChoices: true }, /the reply has no choices/],
    ['empty content', { content: null }, /the reply is empty/],
    ['a reply nested 5,000 levels deep', { content: `{"action":"done","reason":"r","x":${'['.repeat(5000)}${']'.repeat(5000)}}` }, /the reply nests deeper than 64 levels/],
    ['args nested 5,000 levels deep', { json: { action: 'tool', tool: 't', args: `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}`, reason: 'r' } }, /args: args must be a JSON-encoded object/],
  ])('rejects %s as malformed, on one line', async (_name, behaviour, message) => {
    const server = await serve([behaviour]);
    const err = await failure(plannerFor(server).decide(input()));
    expect(err.kind).toBe('malformed');
    expect(err.message).toMatch(message);
    expect(err.message).not.toContain('\n');
  });

  it('retries a 429 and succeeds on the next answer', async () => {
    const server = await serve([{ status: 429 }, { json: DONE }]);
    const result = await plannerFor(server).decide(input());
    expect(result.decision.action).toBe('done');
    expect(server.requests).toHaveLength(2);
  });

  it('fails the call, naming the HTTP status, after a 500 outlasts maxRetries', async () => {
    const server = await serve([{ status: 500 }, { status: 500 }, { status: 500 }]);
    const err = await failure(plannerFor(server, { maxRetries: 2 }).decide(input()));
    expect(err.kind).toBe('call_failed');
    expect(err.message).toMatch(/HTTP 500/);
    expect(server.requests).toHaveLength(3);
  });

  it('does not retry a 400', async () => {
    const server = await serve([{ status: 400, message: 'response_format is not supported' }]);
    const err = await failure(plannerFor(server).decide(input()));
    expect(err.kind).toBe('call_failed');
    expect(err.message).toMatch(/HTTP 400 from http:\/\/127.0.0.1:\d+\/v1: response_format is not supported$/);
    expect(server.requests).toHaveLength(1);
  });

  it('fails the call when the endpoint cannot be reached', async () => {
    const server = await startOpenAiServer([]);
    await server.close();
    const err = await failure(plannerFor(server, { maxRetries: 0 }).decide(input()));
    expect(err.kind).toBe('call_failed');
    expect(err.message).toContain(`cannot reach ${server.url}`);
  });

  it('times out an answer slower than timeoutMs', async () => {
    const server = await serve([{ delayMs: 10_000, then: { json: DONE } }]);
    const started = Date.now();
    const err = await failure(plannerFor(server, { timeoutMs: 300, maxRetries: 0 }).decide(input()));
    expect(err.kind).toBe('timeout');
    expect(err.message).toContain('within 300 ms');
    expect(Date.now() - started).toBeLessThan(5_000);
    await waitFor(() => server.dropped === 1, 5_000, 'the client to hang up');
  });

  it('aborts promptly when the signal fires during the call', async () => {
    const server = await serve([{ hang: true }]);
    const ac = new AbortController();
    const call = failure(plannerFor(server).decide(input({ signal: ac.signal })));
    await waitFor(() => server.requests.length === 1, 5_000, 'the request to arrive');
    const abortedAt = Date.now();
    ac.abort();
    const err = await call;
    expect(err.kind).toBe('aborted');
    expect(Date.now() - abortedAt).toBeLessThan(1_000);
    await waitFor(() => server.dropped === 1, 5_000, 'the client to hang up');
  });

  it('aborts promptly while the client waits out a retry-after before retrying', async () => {
    const server = await serve([{ status: 429, retryAfterMs: 1_000, holdBody: true }, { json: DONE }]);
    const ac = new AbortController();
    const call = failure(plannerFor(server).decide(input({ signal: ac.signal })));
    await waitFor(() => server.dropped === 1, 5_000, 'the client to drop the 429 and wait to retry');
    const abortedAt = Date.now();
    ac.abort();
    const err = await call;
    expect(err.kind).toBe('aborted');
    expect(Date.now() - abortedAt).toBeLessThan(500);
    expect(server.requests).toHaveLength(1);
  });

  it('does not send a request when the signal is already aborted', async () => {
    const server = await serve([{ json: DONE }]);
    const ac = new AbortController();
    ac.abort();
    const err = await failure(plannerFor(server).decide(input({ signal: ac.signal })));
    expect(err.kind).toBe('aborted');
    expect(server.requests).toHaveLength(0);
  });
});
