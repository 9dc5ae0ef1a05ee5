/**
 * OpenTelemetry spans of the task loop, named by the GenAI semantic conventions: the one
 * module that imports `@opentelemetry/api`. Until an application registers an SDK the api
 * hands out non-recording spans, and a run whose span does not record (no SDK, or sampled
 * out) gets NO_TRACE: every call on it below is an empty method, no span, no attributes.
 *
 *   invoke_agent taskloop            one per run in one process (a resumed run is a new span, same taskloop.run.id)
 *   └ step observe|decide|action     one per step, with its seq, kind and status
 *     ├ execute_tool <tool>          the tool call of an observe or action step
 *     └ chat <model>                 the llm planner's model call of a decide step, with token usage
 *
 * Never recorded: tool arguments, tool results, prompts, model replies, error messages
 * (any of them may quote the others). A failure is span status ERROR with a stable
 * `error.type`; the step itself, message included, is in the store under its run id and seq.
 *
 * Parents are passed explicitly (the loop is an async generator: the active context does not
 * survive a `yield`). A tool's or the model client's own spans nest under the call through
 * `context.with`, where the application registered a context manager.
 */
import { type Attributes, type Context, type Span, SpanKind, SpanStatusCode, context, createContextKey, trace } from '@opentelemetry/api';
import type { Run, Step, StepKind } from '../engine/index.js';

/** Where a call's span hangs: the open step's context (opaque to everything but this module). */
export type TraceParent = Context;

/** The instrumentation scope: what a backend shows as the spans' origin. */
export const TRACER_NAME = 'taskloop';
/** Longest untrusted text (a tool name a model made up, a card's model) kept in a span name or attribute. */
export const MAX_TRACE_TEXT = 128;

const RUN_IDS = createContextKey('taskloop.run_ids');
const FAILED_PHASES: ReadonlySet<string> = new Set(['failed', 'rejected', 'blocked', 'budget_exhausted']);

/**
 * Untrusted text made fit for a span name or attribute: at most MAX_TRACE_TEXT characters,
 * control characters and lone surrogates replaced, so an exporter never chokes on it.
 */
export function traceText(text: string): string {
  const cut = text.length > MAX_TRACE_TEXT ? `${text.slice(0, MAX_TRACE_TEXT)}…` : text;
  return cut.replace(/[\p{Cc}\p{Cs}]/gu, '?');
}

export interface ToolCallSpan {
  /** Runs the call with this span active, so the tool's own spans nest under it. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Ends the span; a failure sets status ERROR with its `error.type`. */
  end(out: { ok: true } | { ok: false; errorType?: string | undefined }): void;
}

export interface RunTrace {
  /** Opens the span of the step that starts now (a step still open is ended first). */
  openStep(kind: StepKind): void;
  /** Ends the open step's span as the step was written; when none is open (a call refused at once, a step begun in an earlier process) the span is this moment's. */
  closeStep(step: Pick<Step, 'seq' | 'kind' | 'status' | 'tool'>): void;
  /** The parent of a call made now: the open step, else the run. */
  parent(): TraceParent;
  /** A tool call's span, under the open step. `callId` is the loop's own id for it (never a model's text). */
  toolCall(tool: { name: string; kind: string }, callId: string): ToolCallSpan;
  /** Ends the run span with the run's outcome. */
  end(result: { phase: string; stopReason: string }): void;
  /** Ends the run span on an exception out of the loop (a lost claim, a store error). */
  fail(err: unknown): void;
}

const NO_CALL: ToolCallSpan = { run: (fn) => fn(), end: () => undefined };

function noTrace(parent: Context): RunTrace {
  return { openStep: () => undefined, closeStep: () => undefined, parent: () => parent, toolCall: () => NO_CALL, end: () => undefined, fail: () => undefined };
}

function failWith(span: Span, errorType: string): void {
  span.setAttribute('error.type', traceText(errorType));
  span.setStatus({ code: SpanStatusCode.ERROR, message: traceText(errorType) });
}

/** A stable identifier of an exception: its engine code, else its class name. */
export function errorTypeOf(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    if (err instanceof Error) return err.name;
  }
  return 'unknown';
}

/**
 * Starts the span of one run in this process, under the caller's active context (an
 * application that drives runTaskLoop inside its own span gets the run nested under it).
 */
export function traceRun(run: Pick<Run, 'id' | 'taskId'>, agent: string, resumed: { resumed: boolean; from?: string | undefined }): RunTrace {
  const tracer = trace.getTracer(TRACER_NAME);
  const runSpan = tracer.startSpan('invoke_agent taskloop', { kind: SpanKind.INTERNAL }, context.active());
  const runCtx = trace.setSpan(context.active(), runSpan).setValue(RUN_IDS, { taskId: run.taskId, runId: run.id });
  if (!runSpan.isRecording()) return noTrace(runCtx);
  const ids: Attributes = { 'taskloop.task.id': run.taskId, 'taskloop.run.id': run.id };
  runSpan.setAttributes({
    ...ids,
    'gen_ai.operation.name': 'invoke_agent',
    'gen_ai.agent.name': 'taskloop',
    // The run is the conversation: every span of a run that parked and resumed elsewhere shares it.
    'gen_ai.conversation.id': String(run.id),
    'taskloop.agent': traceText(agent),
    'taskloop.run.resumed': resumed.resumed,
    ...(resumed.from === undefined ? {} : { 'taskloop.run.resumed_from': resumed.from }),
  });
  let step: { span: Span; ctx: Context } | undefined;
  let ended = false;

  const openStep: RunTrace['openStep'] = (kind) => {
    if (step !== undefined) step.span.end();
    const span = tracer.startSpan(`step ${kind}`, { kind: SpanKind.INTERNAL, attributes: { ...ids, 'taskloop.step.kind': kind } }, runCtx);
    step = { span, ctx: trace.setSpan(runCtx, span) };
  };
  const closeStep: RunTrace['closeStep'] = (s) => {
    if (step === undefined) openStep(s.kind);
    const { span } = step!;
    span.setAttributes({ 'taskloop.step.seq': s.seq, 'taskloop.step.status': s.status, ...(s.tool === null ? {} : { 'taskloop.step.tool': traceText(s.tool) }) });
    if (s.status === 'failed') failWith(span, 'step_failed');
    if (s.status === 'unknown') failWith(span, 'unknown_side_effect');
    span.end();
    step = undefined;
  };
  const parent = (): Context => step?.ctx ?? runCtx;
  const toolCall: RunTrace['toolCall'] = (tool, callId) => {
    const name = traceText(tool.name);
    const at = parent();
    const span = tracer.startSpan(`execute_tool ${name}`, {
      kind: SpanKind.INTERNAL,
      attributes: { ...ids, 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': name, 'gen_ai.tool.type': 'function', 'gen_ai.tool.call.id': callId, 'taskloop.tool.kind': tool.kind },
    }, at);
    const callCtx = trace.setSpan(at, span);
    return {
      run: (fn) => context.with(callCtx, fn),
      end: (out) => {
        if (!out.ok) failWith(span, out.errorType ?? 'tool_error');
        span.end();
      },
    };
  };
  const close = (f: (span: Span) => void): void => {
    if (ended) return;
    ended = true;
    if (step !== undefined) {
      step.span.end();
      step = undefined;
    }
    f(runSpan);
    runSpan.end();
  };
  return {
    openStep,
    closeStep,
    parent,
    toolCall,
    end: (result) =>
      close((span) => {
        span.setAttributes({ 'taskloop.run.phase': result.phase, 'taskloop.run.stop_reason': traceText(result.stopReason) });
        if (FAILED_PHASES.has(result.phase)) failWith(span, result.stopReason);
      }),
    fail: (err) => close((span) => failWith(span, errorTypeOf(err))),
  };
}

export interface ModelCallSpan {
  /** Runs the HTTP call with this span active, so an HTTP client instrumentation nests under it. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  end(out: { inputTokens?: unknown; outputTokens?: unknown; responseModel?: unknown; responseId?: unknown; finishReason?: unknown }): void;
  fail(errorType: string): void;
}

const NO_MODEL_CALL: ModelCallSpan = { run: (fn) => fn(), end: () => undefined, fail: () => undefined };

/**
 * The span of one chat-completions call (the `chat` operation). Under `parent` when the
 * loop gives one (nothing when that run is not traced), else under the active context (a
 * planner used on its own).
 */
export function traceModelCall(parent: TraceParent | undefined, req: { model: string; baseURL: string; temperature: number; maxTokens: number }): ModelCallSpan {
  if (parent !== undefined && trace.getSpan(parent)?.isRecording() !== true) return NO_MODEL_CALL;
  const at = parent ?? context.active();
  const model = traceText(req.model);
  const span = trace.getTracer(TRACER_NAME).startSpan(`chat ${model}`, { kind: SpanKind.CLIENT }, at);
  if (!span.isRecording()) return NO_MODEL_CALL;
  const ids = at.getValue(RUN_IDS) as { taskId: number; runId: number } | undefined;
  const server = serverOf(req.baseURL);
  span.setAttributes({
    ...(ids === undefined ? {} : { 'taskloop.task.id': ids.taskId, 'taskloop.run.id': ids.runId }),
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'gen_ai.request.model': model,
    'gen_ai.request.temperature': req.temperature,
    'gen_ai.request.max_tokens': req.maxTokens,
    'gen_ai.output.type': 'json',
    ...server,
  });
  const callCtx = trace.setSpan(at, span);
  return {
    run: (fn) => context.with(callCtx, fn),
    end: (out) => {
      // What a server answers is untrusted: only numbers count as usage, only strings as names.
      const count = (n: unknown) => (typeof n === 'number' && Number.isFinite(n) ? n : undefined);
      const text = (t: unknown) => (typeof t === 'string' ? traceText(t) : undefined);
      const attrs: Attributes = {
        'gen_ai.usage.input_tokens': count(out.inputTokens),
        'gen_ai.usage.output_tokens': count(out.outputTokens),
        'gen_ai.response.model': text(out.responseModel),
        'gen_ai.response.id': text(out.responseId),
        'gen_ai.response.finish_reasons': typeof out.finishReason === 'string' ? [traceText(out.finishReason)] : undefined,
      };
      for (const [key, value] of Object.entries(attrs)) if (value !== undefined) span.setAttribute(key, value);
      span.end();
    },
    fail: (errorType) => {
      failWith(span, errorType);
      span.end();
    },
  };
}

/** `server.address` / `server.port` of the endpoint: host and port only (a URL may carry credentials or a key in its path). */
function serverOf(baseURL: string): Attributes {
  try {
    const url = new URL(baseURL);
    const port = url.port === '' ? (url.protocol === 'http:' ? 80 : 443) : Number(url.port);
    return { 'server.address': traceText(url.hostname), 'server.port': port };
  } catch {
    return {};
  }
}
