/**
 * The `llm` planner: one chat completion per decision against any OpenAI-compatible
 * endpoint, with a strict JSON-schema reply. The only module that imports `openai`.
 *
 * Every failure of a decision rejects with a PlannerError (a counted failure for the loop),
 * never anything else: bad options are refused once, at creation, with an EngineError.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletion, ChatCompletionContentPart, ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import { z } from 'zod/v4';
import { EngineError } from '../../engine/errors.js';
import { depthMessage, nestsDeeper } from '../../engine/json-depth.js';
import { type DecideInput, type DecideResult, type Decision, type Planner, PlannerError, type PlannerUsage, tokenCount } from '../planner.js';
import { traceModelCall } from '../tracing.js';
import { hasVision, modelFor } from './models.js';
import { buildPrompt } from './prompt.js';

export interface LlmPlannerOptions {
  /**
   * Base URL of the OpenAI-compatible API, including the version path (`http://host:11434/v1`).
   * @defaultValue `process.env.OPENAI_BASE_URL`, else OpenAI's own API
   */
  baseURL?: string;
  /**
   * API key sent as a bearer token. Endpoints that need none still need a placeholder.
   * @defaultValue `process.env.OPENAI_API_KEY`
   */
  apiKey?: string;
  /**
   * Model name sent with every request.
   * @defaultValue `process.env.TASKLOOP_MODEL`, else `'gpt-4o-mini'`
   */
  model?: string;
  /**
   * Time allowed for one HTTP attempt to answer; a retry gets the same again.
   * @defaultValue 60000
   */
  timeoutMs?: number;
  /**
   * Retries of a 408, 409, 429, 5xx or connection failure, with backoff (done by the client,
   * which honours `retry-after` / `retry-after-ms`).
   * @defaultValue 2
   */
  maxRetries?: number;
  /**
   * Price per 1,000 tokens, to compute each decision's cost.
   * @defaultValue none: cost 0
   */
  price?: { promptPer1k: number; completionPer1k: number };
  /**
   * Whether the model accepts image parts. When false, a screenshot in the observation is
   * only mentioned, never sent.
   * @defaultValue whether the model is listed as vision-capable (models.ts, `TASKLOOP_VISION_MODELS`)
   */
  vision?: boolean;
}

const optionsSchema = z.object({
  baseURL: z.url().optional(),
  apiKey: z.string().min(1, 'no API key: set OPENAI_API_KEY or pass apiKey (any placeholder for an endpoint without auth)'),
  model: z.string().min(1),
  timeoutMs: z.number().int().positive(),
  maxRetries: z.number().int().min(0).max(10),
  price: z.object({ promptPer1k: z.number().min(0), completionPer1k: z.number().min(0) }).optional(),
  vision: z.boolean(),
});

/**
 * The reply schema sent as `response_format`. Strict mode forbids free-form objects (every
 * object needs `additionalProperties: false` and all keys listed), so `args` travels as a
 * JSON-encoded string and is parsed here.
 */
export const DECISION_JSON_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'tool', 'args', 'reason'],
  properties: {
    action: { type: 'string', enum: ['tool', 'done', 'fail'] },
    tool: { type: ['string', 'null'], description: 'Name of one allowed tool when action is "tool", else null.' },
    args: {
      type: ['string', 'null'],
      description: 'The tool arguments as a JSON-encoded object (e.g. "{\\"path\\":\\"a.txt\\"}") when action is "tool", else null.',
    },
    reason: { type: 'string', description: 'Why this step, in one or two sentences.' },
  },
} as const;

/** The reply schema of a card with a plan: the model may also answer "replan". */
export const PLAN_DECISION_JSON_SCHEMA = {
  ...DECISION_JSON_SCHEMA,
  properties: {
    ...DECISION_JSON_SCHEMA.properties,
    action: { type: 'string', enum: ['tool', 'done', 'fail', 'replan'] },
    args: {
      type: ['string', 'null'],
      description: 'When action is "tool": the tool arguments as a JSON-encoded object. When "replan": the JSON-encoded object {"plan": [items]}. Else null.',
    },
  },
} as const;

/**
 * What a reply may hold. `args` is a JSON string per the schema; an object is accepted too,
 * for compatible servers that ignore strict mode. A tool call with null args means `{}`.
 */
const replySchema = z
  .object({
    action: z.enum(['tool', 'done', 'fail', 'replan']),
    tool: z.string().nullish(),
    args: z.unknown(),
    reason: z.string(),
  })
  .transform((reply, ctx): Decision => {
    if (reply.action === 'replan') {
      const card = toArgs(reply.args);
      if (card === undefined || !Array.isArray(card.plan)) {
        ctx.addIssue({ code: 'custom', path: ['args'], message: 'a replan needs args: a JSON-encoded object {"plan": [items]}' });
        return z.NEVER;
      }
      return { action: 'replan', card, reason: reply.reason };
    }
    if (reply.action !== 'tool') return { action: reply.action, reason: reply.reason };
    if (!reply.tool) {
      ctx.addIssue({ code: 'custom', path: ['tool'], message: 'a tool decision needs a non-empty tool name' });
      return z.NEVER;
    }
    const args = toArgs(reply.args);
    if (args === undefined) {
      ctx.addIssue({ code: 'custom', path: ['args'], message: 'args must be a JSON-encoded object' });
      return z.NEVER;
    }
    return { action: 'tool', tool: reply.tool, args, reason: reply.reason };
  });

function toArgs(raw: unknown): Record<string, unknown> | undefined {
  if (raw === null || raw === undefined) return {};
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      return undefined;
    }
  }
  // A model's arguments are untrusted JSON: too deep is malformed, before anything recursive sees it.
  if (nestsDeeper(value)) return undefined;
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

export function createLlmPlanner(opts: LlmPlannerOptions = {}): Planner {
  const model = modelFor(opts);
  const parsed = optionsSchema.safeParse({
    baseURL: opts.baseURL ?? (process.env.OPENAI_BASE_URL || undefined),
    apiKey: opts.apiKey ?? process.env.OPENAI_API_KEY ?? '',
    model,
    timeoutMs: opts.timeoutMs ?? 60_000,
    maxRetries: opts.maxRetries ?? 2,
    price: opts.price,
    vision: opts.vision ?? hasVision(model),
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.join('.') || 'options';
    throw new EngineError('VALIDATION_FAILED', `llm planner: ${where}: ${issue?.message ?? 'invalid'}`, { path: where });
  }
  const o = parsed.data;
  const client = new OpenAI({ baseURL: o.baseURL, apiKey: o.apiKey, timeout: o.timeoutMs, maxRetries: o.maxRetries });

  async function decide(input: DecideInput): Promise<DecideResult> {
    const prompt = buildPrompt(input, { vision: o.vision });
    const content: ChatCompletionContentPart[] = [{ type: 'text', text: prompt.user }];
    if (prompt.imagePng !== undefined) {
      content.push({ type: 'image_url', image_url: { url: `data:image/png;base64,${prompt.imagePng}` } });
    }
    const body: ChatCompletionCreateParamsNonStreaming = {
      model: o.model,
      temperature: 0,
      max_tokens: 1024,
      response_format: {
        type: 'json_schema',
        json_schema: { name: 'decision', strict: true, schema: input.plan === undefined ? DECISION_JSON_SCHEMA : PLAN_DECISION_JSON_SCHEMA },
      },
      messages: [
        { role: 'system', content: prompt.system },
        // A text-only prompt goes as a plain string: some compatible servers reject part arrays.
        { role: 'user', content: content.length === 1 ? prompt.user : content },
      ],
    };
    const span = traceModelCall(input.trace, { model: o.model, baseURL: client.baseURL, temperature: 0, maxTokens: 1024 });
    let completion: ChatCompletion;
    try {
      completion = await span.run(() => settleOnAbort(client.chat.completions.create(body, { signal: input.signal }), input.signal));
    } catch (err) {
      const failure = callError(err, input.signal);
      span.fail(failure.kind);
      throw failure;
    }
    const usage = usageOf(completion);
    span.end({ inputTokens: usage?.promptTokens, outputTokens: usage?.completionTokens, responseModel: completion.model, responseId: completion.id, finishReason: completion.choices?.[0]?.finish_reason });
    const decision = readDecision(completion);
    if (decision.action === 'replan' && input.plan === undefined) {
      throw new PlannerError('malformed', 'llm planner: the model answered "replan", but this card has no plan to replace');
    }
    return { decision, usage };
  }

  function callError(err: unknown, signal: AbortSignal): PlannerError {
    if (signal.aborted || err instanceof APIUserAbortError) return new PlannerError('aborted', `llm planner: call to ${o.model} aborted`);
    if (err instanceof APIConnectionTimeoutError) {
      return new PlannerError('timeout', `llm planner: ${o.model} did not answer within ${o.timeoutMs} ms (${o.maxRetries} retries)`);
    }
    if (err instanceof APIConnectionError) {
      return new PlannerError('call_failed', `llm planner: cannot reach ${client.baseURL}: ${oneLine(err.message)}`);
    }
    if (err instanceof APIError) {
      return new PlannerError('call_failed', `llm planner: HTTP ${err.status ?? '?'} from ${client.baseURL}: ${oneLine(err.message.replace(/^\d{3} /, ''))}`);
    }
    return new PlannerError('call_failed', `llm planner: ${oneLine(err instanceof Error ? err.message : String(err))}`);
  }

  function usageOf(completion: ChatCompletion): PlannerUsage | undefined {
    if (!completion.usage) return undefined;
    // The model server's counts, as numbers the stores keep: whole, not negative, not past
    // 2^53 (a fraction was stored on SQLite and refused by PostgreSQL on every attempt).
    const promptTokens = tokenCount(completion.usage.prompt_tokens);
    const completionTokens = tokenCount(completion.usage.completion_tokens);
    const cost = o.price ? (promptTokens * o.price.promptPer1k + completionTokens * o.price.completionPer1k) / 1000 : 0;
    return { promptTokens, completionTokens, cost };
  }

  return { name: 'llm', decide };
}

/**
 * Rejects as soon as the signal fires. The client aborts an HTTP attempt itself, but not its
 * backoff sleep between retries, which lasts as long as the server's `retry-after` says.
 */
function settleOnAbort<T>(call: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    call.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** The decision in a completion, or a 'malformed' PlannerError quoting what came back. */
function readDecision(completion: ChatCompletion): Decision {
  const choice = completion.choices?.[0];
  if (!choice) throw new PlannerError('malformed', 'llm planner: the reply has no choices');
  const { content, refusal } = choice.message ?? {};
  if (refusal) throw new PlannerError('malformed', `llm planner: the model refused: ${quote(refusal)}`);
  if (typeof content !== 'string' || content.trim() === '') {
    throw new PlannerError('malformed', `llm planner: the reply is empty (finish_reason ${choice.finish_reason ?? 'none'})`);
  }
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch {
    const cut = choice.finish_reason === 'length' ? ' (cut at max_tokens)' : '';
    throw new PlannerError('malformed', `llm planner: the reply is not JSON${cut}: ${quote(content)}`);
  }
  if (nestsDeeper(json)) throw new PlannerError('malformed', `llm planner: the reply ${depthMessage()}`);
  const result = replySchema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0];
    const at = issue?.path.length ? `${issue.path.join('.')}: ` : '';
    throw new PlannerError('malformed', `llm planner: ${at}${issue?.message ?? 'invalid reply'} in ${quote(content)}`);
  }
  return result.data;
}

/** A short, one-line, quoted prefix of model output for an error message. */
function quote(text: string, max = 80): string {
  return JSON.stringify(text.length > max ? `${text.slice(0, max)}…` : text);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
