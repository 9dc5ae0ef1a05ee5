/**
 * The loop's OpenTelemetry spans, read back through the SDK's in-memory exporter: real cards
 * through runTaskLoop on a real SQLite file, the llm planner against a local server that
 * speaks the OpenAI API.
 */
import { type Tracer, type TracerProvider, trace } from '@opentelemetry/api';
import { AlwaysOffSampler, BasicTracerProvider, InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { createLlmPlanner } from '../../src/workers/planners/llm.js';
import { MAX_TRACE_TEXT } from '../../src/workers/tracing.js';
import { type Behaviour, startOpenAiServer } from '../fixtures/openai-server.js';
import { type Harness, card, claimWith, drive, harness, loopContext, runCard } from './harness.js';

const operator = { id: 'operator', role: 'operator' } as const;

/** Registers an SDK with an in-memory exporter for this test; the global is disabled after it. */
function exporter(): InMemorySpanExporter {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(memory)] });
  expect(trace.setGlobalTracerProvider(provider)).toBe(true);
  return memory;
}

afterEach(() => trace.disable());

const parentOf = (s: ReadableSpan): string | undefined => s.parentSpanContext?.spanId;
const idOf = (s: ReadableSpan): string => s.spanContext().spanId;
const childrenOf = (spans: ReadableSpan[], parent: ReadableSpan): ReadableSpan[] => spans.filter((s) => parentOf(s) === idOf(parent));
const named = (spans: ReadableSpan[], name: string): ReadableSpan[] => spans.filter((s) => s.name === name);
const ERROR = 2; // SpanStatusCode.ERROR

/** Everything a backend would receive as text: names, attributes, status messages, events. */
function everything(spans: ReadableSpan[]): string {
  return JSON.stringify(spans.map((s) => ({ name: s.name, attributes: s.attributes, status: s.status, events: s.events, links: s.links })));
}

async function llmServer(script: Behaviour[]) {
  const server = await startOpenAiServer(script);
  onTestFinished(() => server.close());
  return server;
}

describe('traces of a run', () => {
  it('nest run → step → tool call with the task, run and step ids, a failing tool in ERROR, and no argument or result text', async () => {
    const memory = exporter();
    const h = harness();
    const { result, claim } = await runCard(h, card({
      allowed_tools: ['echo', 'broken'],
      observe: { tool: 'echo', args: { text: 'OBSERVED-SECRET' } },
      budget: { max_steps: 20, max_failures: 3 },
      script: [{ action: 'tool', tool: 'echo', args: { text: 'ARGUMENT-SECRET' } }, { action: 'tool', tool: 'broken', args: {} }, { action: 'done' }],
    }));
    expect(result).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    const spans = memory.getFinishedSpans();

    const [run, ...others] = named(spans, 'invoke_agent taskloop');
    expect(others).toHaveLength(0);
    expect(parentOf(run!)).toBeUndefined();
    expect(run!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent', 'taskloop.task.id': claim.id, 'taskloop.run.id': result.runId, 'taskloop.run.resumed': false,
      'taskloop.run.phase': 'completed', 'taskloop.run.stop_reason': 'accepted', 'taskloop.agent': 'worker',
    });
    expect(run!.status.code).not.toBe(ERROR);

    // Every step of the run is one span under the run, in the order and with the seq the store has.
    const stored = (await h.runs.getRun(result.runId)).steps;
    const steps = childrenOf(spans, run!).filter((s) => s.name.startsWith('step ')).sort((a, b) => Number(a.attributes['taskloop.step.seq']) - Number(b.attributes['taskloop.step.seq']));
    expect(steps.map((s) => [s.name, s.attributes['taskloop.step.seq'], s.attributes['taskloop.step.status']])).toEqual(stored.map((s) => [`step ${s.kind}`, s.seq, s.status]));
    expect(stored.map((s) => `${s.kind}:${s.tool ?? ''}:${s.status}`)).toEqual([
      'observe:echo:ok', 'decide::ok', 'action:echo:ok', 'observe:echo:ok', 'decide::ok', 'action:broken:failed', 'observe:echo:ok', 'decide::ok',
    ]);
    for (const s of steps) expect(s.attributes).toMatchObject({ 'taskloop.task.id': claim.id, 'taskloop.run.id': result.runId, 'taskloop.step.kind': s.name.slice(5) });

    // Each observe and action step holds exactly its one tool call; a decide of the scripted planner holds none.
    for (const [i, s] of steps.entries()) {
      const calls = childrenOf(spans, s);
      const want = stored[i]!.kind === 'decide' ? [] : [`execute_tool ${stored[i]!.tool}`];
      expect(calls.map((c) => c.name)).toEqual(want);
    }
    const echoAction = childrenOf(spans, steps[2]!)[0]!;
    expect(echoAction.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'echo', 'gen_ai.tool.call.id': stored[2]!.idempotencyKey, 'taskloop.tool.kind': 'read', 'taskloop.run.id': result.runId,
    });
    const brokenCall = childrenOf(spans, steps[5]!)[0]!;
    expect(brokenCall.status.code).toBe(ERROR);
    expect(brokenCall.attributes['error.type']).toBe('tool_error');
    expect(steps[5]!.status.code).toBe(ERROR);
    expect(steps.filter((s) => s.status.code === ERROR)).toHaveLength(1);

    const text = everything(spans);
    expect(text).not.toMatch(/SECRET|broken tool is broken|test goal/);
  });

  it('a model call is a chat span under its decide step, with the model and the token usage; prompts and replies are not recorded', async () => {
    const memory = exporter();
    const h = harness();
    const server = await llmServer([
      { json: { action: 'tool', tool: 'echo', args: JSON.stringify({ text: 'MODEL-ARG-SECRET' }), reason: 'REASON-SECRET' }, usage: { prompt_tokens: 321, completion_tokens: 45 } },
      { status: 500, message: 'upstream broke' },
      { json: { action: 'done', tool: null, args: null, reason: 'done' }, usage: { prompt_tokens: 400, completion_tokens: 7 } },
    ]);
    const { result } = await runCard(h, card({ planner: 'llm', model: 'gpt-4o', script: undefined, goal: 'GOAL-SECRET', allowed_tools: ['echo'] }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'KEY-SECRET', model: c.model, maxRetries: 0 }),
    });
    expect(result.phase).toBe('completed');
    const spans = memory.getFinishedSpans();
    const chats = named(spans, 'chat gpt-4o');
    expect(chats).toHaveLength(3);
    const decides = named(spans, 'step decide');
    expect(chats.map((c) => parentOf(c))).toEqual(decides.map(idOf));
    const [first, failed, last] = chats;
    expect(first!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.request.model': 'gpt-4o', 'gen_ai.usage.input_tokens': 321, 'gen_ai.usage.output_tokens': 45,
      'server.address': '127.0.0.1', 'taskloop.run.id': result.runId, 'taskloop.task.id': result.taskId,
    });
    expect(first!.kind).toBe(2); // SpanKind.CLIENT
    expect(last!.attributes['gen_ai.usage.input_tokens']).toBe(400);
    expect(failed!.status.code).toBe(ERROR);
    expect(failed!.attributes['error.type']).toBe('call_failed');
    expect(failed!.attributes['gen_ai.usage.input_tokens']).toBeUndefined();
    expect(decides[1]!.status.code).toBe(ERROR);
    expect(everything(spans)).not.toMatch(/SECRET|upstream broke/);
  });

  it('a parked run and its resumption are two run spans with the same run id; the approved call nests under a step of the second', async () => {
    const memory = exporter();
    const h = harness();
    await ticketStoreFor(h.tm.store).seed();
    await h.tm.createTask({ title: 'ticket', card: ticketCard('T-1024') }, operator);
    const once = async (h2: Harness, agent: string) => drive(loopContext(h2, (await h2.tm.claimTask({ agent, start: true }))!));
    const parked = await once(h, 'worker');
    expect(parked.result.phase).toBe('waiting_approval');
    const [approval] = await h.runs.listApprovals('pending');
    await h.runs.decideApproval({ approvalId: approval!.id, approve: true, actor: operator });
    const resumed = await once(h, 'another-worker');
    expect(resumed.result.phase).toBe('completed');

    const spans = memory.getFinishedSpans();
    const runs = named(spans, 'invoke_agent taskloop');
    expect(runs.map((r) => [r.attributes['taskloop.run.id'], r.attributes['gen_ai.conversation.id'], r.attributes['taskloop.run.resumed'], r.attributes['taskloop.run.phase']])).toEqual([
      [parked.result.runId, String(parked.result.runId), false, 'waiting_approval'],
      [parked.result.runId, String(parked.result.runId), true, 'completed'],
    ]);
    expect(runs[1]!.attributes['taskloop.run.resumed_from']).toBe('waiting_approval');
    const parkedStep = childrenOf(spans, runs[0]!).find((s) => s.attributes['taskloop.step.status'] === 'waiting_approval');
    expect(parkedStep?.attributes['taskloop.step.tool']).toBe('notify_oncall');
    // The approved call runs in the second process, under a step span of that run.
    const page = named(spans, 'execute_tool notify_oncall');
    expect(page).toHaveLength(1);
    const holder = spans.find((s) => idOf(s) === parentOf(page[0]!));
    expect(holder?.name).toBe('step action');
    expect(parentOf(holder!)).toBe(idOf(runs[1]!));
    // Reads of the ticket: each observation under its step; acceptance's final-state read, no step of its own, under the run.
    const reads = named(spans, 'execute_tool get_ticket').map((s) => spans.find((p) => idOf(p) === parentOf(s))!.name);
    expect(reads.filter((name) => name !== 'step observe')).toEqual(['invoke_agent taskloop']);
    expect(reads.length).toBeGreaterThan(2);
    expect(everything(spans)).not.toContain('is now urgent');
  });

  it('a run that loses its claim mid-call ends its span in ERROR with the code, and the tool call as aborted', async () => {
    const memory = exporter();
    const h = harness();
    const other = h.other();
    const claim = await claimWith(h, card({ allowed_tools: ['wait'], script: [{ action: 'tool', tool: 'wait', args: { ms: 600_000 } }, { action: 'done' }] }));
    const run = drive(loopContext(h, claim), async (e) => {
      if (e.type === 'step_started' && e.step.kind === 'action') await other.tm.cancelTask({ taskId: claim.id, actor: operator, reason: 'no longer needed' });
    });
    await expect(run).rejects.toMatchObject({ code: 'STALE_CLAIM' });
    const spans = memory.getFinishedSpans();
    const [runSpan] = named(spans, 'invoke_agent taskloop');
    expect(runSpan!.status.code).toBe(ERROR);
    expect(runSpan!.attributes['error.type']).toBe('STALE_CLAIM');
    const [call] = named(spans, 'execute_tool wait');
    expect(call!.attributes['error.type']).toBe('aborted');
    // The step that was open when the loop threw is ended (exported) too, under the run.
    const action = spans.find((s) => idOf(s) === parentOf(call!));
    expect([action?.name, action && parentOf(action)]).toEqual(['step action', idOf(runSpan!)]);
  });

  it('a run whose span does not record (sampled out) starts no other span', async () => {
    const memory = new InMemorySpanExporter();
    const real = new BasicTracerProvider({ sampler: new AlwaysOffSampler(), spanProcessors: [new SimpleSpanProcessor(memory)] });
    let started = 0;
    const counting: TracerProvider = {
      getTracer(name, version, options): Tracer {
        const tracer = real.getTracer(name, version, options);
        return {
          startSpan: (...args: Parameters<Tracer['startSpan']>) => {
            started++;
            return tracer.startSpan(...args);
          },
          startActiveSpan: tracer.startActiveSpan.bind(tracer) as Tracer['startActiveSpan'],
        };
      },
    };
    expect(trace.setGlobalTracerProvider(counting)).toBe(true);
    const h = harness();
    const { result } = await runCard(h, card({ allowed_tools: ['echo'], script: [{ action: 'tool', tool: 'echo', args: { text: 'a' } }, { action: 'tool', tool: 'echo', args: { text: 'b' } }, { action: 'done' }] }));
    expect(result.phase).toBe('completed');
    expect(started).toBe(1);
    expect(memory.getFinishedSpans()).toHaveLength(0);
  });
});

describe('traces under attack', () => {
  it('a huge or control-laden model name from a card and tool name from a model cannot blow up span names or attributes', async () => {
    const memory = exporter();
    const h = harness();
    const model = `m${'\u0007\n'.repeat(50)}${'x'.repeat(100_000)}`;
    // Cut at the limit, the 'a' leaves half of an emoji: a lone surrogate.
    const hugeTool = `a${'\ud83d\ude00'.repeat(200)}${'t'.repeat(50_000)}\u0000`;
    const server = await llmServer([
      { json: { action: 'tool', tool: hugeTool, args: '{}', reason: 'a tool of my own' } },
      { json: { action: 'done', tool: null, args: null, reason: 'done' } },
    ]);
    const { result } = await runCard(h, card({ planner: 'llm', model, script: undefined }), {
      planner: (c) => createLlmPlanner({ baseURL: server.url, apiKey: 'test', model: c.model }),
    });
    expect(result.phase).toBe('completed');
    const spans = memory.getFinishedSpans();
    const refused = spans.find((s) => s.attributes['taskloop.step.status'] === 'rejected');
    expect(refused).toBeDefined();
    const kept = String(refused!.attributes['taskloop.step.tool']);
    expect(kept.length).toBeLessThanOrEqual(MAX_TRACE_TEXT + 1);
    // The step stores a planner's tool name clipped (never inside a pair) and escaped, so the
    // span carries that; the trace's own cut is the chat span's below.
    expect(kept).toBe(`a${'\ud83d\ude00'.repeat(49)}… (50402 chars, cut)`);
    const chat = spans.find((s) => s.name.startsWith('chat '))!;
    expect(chat.name.length).toBeLessThanOrEqual('chat '.length + MAX_TRACE_TEXT + 1);
    expect(chat.name).toMatch(/^chat m\?{100}x+…$/);
    // Nothing an exporter would choke on: no control characters, no lone surrogate.
    const unfit = /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
    for (const s of spans) {
      expect(s.name.length).toBeLessThanOrEqual('execute_tool '.length + MAX_TRACE_TEXT + 1);
      expect(s.name).not.toMatch(unfit);
      for (const value of Object.values(s.attributes)) {
        if (typeof value !== 'string') continue;
        expect(value.length).toBeLessThanOrEqual(MAX_TRACE_TEXT + 1);
        expect(value).not.toMatch(unfit);
      }
    }
  });
});
