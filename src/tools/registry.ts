/**
 * The tool registry (DESIGN §6). A tool is a named, schema-checked operation: its zod
 * schema validates arguments before anything runs and is exported once, at registration,
 * as JSON Schema for OpenAI function calling and MCP.
 */
import { z } from 'zod/v4';
import { type Actor, EngineError, LIMITS, type TaskCard, depthMessage, nestsDeeper, textNestsDeeper } from '../engine/index.js';
import { type StrictShape, strictParameters, strictShape } from './strict-schema.js';

export type ToolKind = 'read' | 'write';
export type ToolRisk = 'low' | 'high';

/** What a tool gets besides its arguments. */
export interface ToolContext {
  /** Aborted on stop, on the tool's timeout and on shutdown; tools must honour it. */
  signal: AbortSignal;
  taskId: number;
  runId: number;
  /** The acting agent, bound by the runtime (never a model-filled field). */
  agent: string;
  /**
   * Whom the engine-facing tools (the task tools) act for, when not the agent: inside a run,
   * the card's author, so an agent's card can do through them only what its author may.
   * @defaultValue the agent
   */
  actor?: Actor;
  /** Stable across a crash retry of the same step: use it to make writes idempotent. */
  idempotencyKey: string;
  /** Services the runtime offers to tools (e.g. the task manager, the ticket demo's store). */
  services: ToolServices;
}

/** Filled by the runtime that hosts the tools; each tool set documents what it needs. */
export interface ToolServices {
  [name: string]: unknown;
}

export interface ToolSpec<A extends Record<string, unknown>> {
  name: string;
  description: string;
  args: z.ZodType<A>;
  kind: ToolKind;
  /** @defaultValue 'low'. High-risk calls need an approval. */
  risk?: ToolRisk;
  /** @defaultValue 30000 */
  timeoutMs?: number;
  /** @defaultValue 65536 */
  maxOutputBytes?: number;
  /** A retried call with the same idempotency key has no further effect. @defaultValue false */
  idempotent?: boolean;
  /** For write tools: which argument names the target, and which card scope key must list it. */
  target?: { arg: string; scope: string };
  /**
   * The result carries a PNG screenshot, base64, in its `image_png` field. The loop keeps the
   * image out of the step log and hands it to the planner; an llm card with such a tool needs
   * a vision model. @defaultValue false
   */
  image?: boolean;
  /**
   * The tool reaches past anything a card can scope — the desktop shows and takes input for
   * whatever the operator has open — so allowing it is a card power: only a card an operator
   * wrote may list it in allowed_tools (checked when the run starts). @defaultValue false
   */
  operatorOnly?: boolean;
  /** What the card must provide for this tool (e.g. an allowlist): problems, [] when none. */
  checkCard?(card: TaskCard): string[];
  /** A per-call admission check against the card, made by the gate: a refusal, or null. */
  admit?(args: A, card: TaskCard): string | null;
  execute(args: A, ctx: ToolContext): Promise<unknown>;
}

export interface Tool {
  readonly name: string;
  readonly description: string;
  readonly kind: ToolKind;
  readonly risk: ToolRisk;
  readonly timeoutMs: number;
  readonly maxOutputBytes: number;
  readonly idempotent: boolean;
  readonly target: { arg: string; scope: string } | null;
  readonly image: boolean;
  readonly operatorOnly: boolean;
  checkCard(card: TaskCard): string[];
  admit(args: Record<string, unknown>, card: TaskCard): string | null;
  /** JSON Schema of the arguments, computed once. */
  readonly parameters: Record<string, unknown>;
  /**
   * Validates raw arguments; throws VALIDATION_FAILED naming the tool and field. Arguments
   * nested deeper than LIMITS.jsonDepth are refused before zod walks them.
   */
  parse(args: unknown): Record<string, unknown>;
  execute(args: Record<string, unknown>, ctx: ToolContext): Promise<unknown>;
}

const NAME = /^[a-z][a-z0-9_]{0,63}$/;

export function defineTool<A extends Record<string, unknown>>(spec: ToolSpec<A>): Tool {
  if (!NAME.test(spec.name)) throw new Error(`tool name '${spec.name}' must match ${NAME}`);
  if (spec.kind !== 'read' && spec.kind !== 'write') throw new Error(`tool ${spec.name}: kind must be read or write`);
  // A call's timer (tools/deadline.ts) fires after 1 ms for a delay it cannot take: refused here, once.
  if (spec.timeoutMs !== undefined && !(Number.isFinite(spec.timeoutMs) && spec.timeoutMs > 0)) {
    throw new Error(`tool ${spec.name}: timeoutMs must be a positive number of milliseconds, not ${String(spec.timeoutMs)}`);
  }
  const parameters = z.toJSONSchema(spec.args, { io: 'input' }) as Record<string, unknown>;
  delete parameters.$schema;
  const shape = strictShape(parameters);
  return Object.freeze({
    name: spec.name,
    description: spec.description,
    kind: spec.kind,
    risk: spec.risk ?? 'low',
    timeoutMs: spec.timeoutMs ?? 30_000,
    maxOutputBytes: spec.maxOutputBytes ?? 65_536,
    idempotent: spec.idempotent ?? false,
    target: spec.target ?? null,
    image: spec.image ?? false,
    operatorOnly: spec.operatorOnly ?? false,
    checkCard: (card: TaskCard) => spec.checkCard?.(card) ?? [],
    admit: (args: Record<string, unknown>, card: TaskCard) => spec.admit?.(args as A, card) ?? null,
    parameters,
    parse(args: unknown) {
      if (nestsDeeper(args, LIMITS.jsonDepth)) throw new EngineError('VALIDATION_FAILED', `${spec.name}: arguments ${depthMessage(LIMITS.jsonDepth)}`);
      const parsed = spec.args.safeParse(strictInput(args ?? {}, shape, spec.name));
      if (parsed.success) return parsed.data;
      const issue = parsed.error.issues[0]!;
      const where = issue.path.length > 0 ? ` ${issue.path.join('.')}` : '';
      throw new EngineError('VALIDATION_FAILED', `${spec.name}: argument${where}: ${issue.message}`);
    },
    execute: (args: Record<string, unknown>, ctx: ToolContext) => spec.execute(args as A, ctx),
  });
}

/**
 * What a strict-mode caller sends, read as it means it (strict-schema.ts): `null` for an
 * optional argument is "not given", and a JSON string for a free-form object is the object.
 */
function strictInput(args: unknown, shape: StrictShape, tool: string): unknown {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return args;
  let out: Record<string, unknown> | undefined;
  const copy = () => (out ??= { ...(args as Record<string, unknown>) });
  for (const key of shape.optional) if (Object.hasOwn(args, key) && (args as Record<string, unknown>)[key] === null) delete copy()[key];
  for (const key of shape.freeForm) {
    const value = (out ?? (args as Record<string, unknown>))[key];
    if (typeof value !== 'string') continue;
    if (textNestsDeeper(value, LIMITS.jsonDepth)) throw new EngineError('VALIDATION_FAILED', `${tool}: argument ${key} ${depthMessage(LIMITS.jsonDepth)}`);
    try {
      copy()[key] = JSON.parse(value) as unknown;
    } catch {
      throw new EngineError('VALIDATION_FAILED', `${tool}: argument ${key}: a string here must be a JSON-encoded object`);
    }
  }
  return out ?? args;
}

export interface ToolRegistry {
  register(...tools: Tool[]): void;
  get(name: string): Tool | undefined;
  list(): Tool[];
}

export function createToolRegistry(initial: Tool[] = []): ToolRegistry {
  const tools = new Map<string, Tool>();
  const registry: ToolRegistry = {
    register(...more) {
      for (const tool of more) {
        if (tools.has(tool.name)) throw new Error(`tool ${tool.name} is registered twice`);
        // defineTool checks it too, but a tool built by hand reaches here unchecked: a kind the
        // gate does not know would escape the write budget and every hook filtered by kind.
        if (tool.kind !== 'read' && tool.kind !== 'write') throw new Error(`tool ${tool.name}: kind must be read or write, not ${JSON.stringify(tool.kind)}`);
        tools.set(tool.name, tool);
      }
    },
    get: (name) => tools.get(name),
    list: () => [...tools.values()],
  };
  registry.register(...initial);
  return registry;
}

export interface OpenAiFunction {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown>; strict?: true };
}

/** The OpenAI function-calling form of a tool; `strict`: the form strict mode accepts (strict-schema.ts). */
export function toOpenAiFunction(tool: Tool, opts: { strict?: boolean } = {}): OpenAiFunction {
  if (opts.strict !== true) return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: strictParameters(tool.parameters, tool.name), strict: true } };
}
