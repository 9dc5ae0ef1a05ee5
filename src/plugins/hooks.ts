/**
 * Hooks and plugins (DESIGN §6, seed 002). A closed set of hook names; plugins register
 * explicitly through the API they are given, and registration closes once the runtime
 * starts. Hooks run in registration order and are awaited. `tool_before` hooks may block
 * a call or rewrite its arguments, and they fail closed: a hook that throws, times out or
 * is aborted denies the call, with a message that names the plugin.
 */

export const HOOK_NAMES = ['tool_before', 'tool_after', 'run_start', 'run_end', 'task_transition', 'session_reset'] as const;
export type HookName = (typeof HOOK_NAMES)[number];

export interface ToolCallContext {
  tool: string;
  kind: 'read' | 'write';
  risk: 'low' | 'high';
  args: Record<string, unknown>;
  taskId: number;
  runId: number;
  /** The acting agent, bound by the runtime. */
  agent: string;
  card: Record<string, unknown>;
  signal: AbortSignal;
  /** What the runtime offers (e.g. `manager`, a TaskManager). */
  services: Record<string, unknown>;
}

/** What a `tool_before` hook may answer: nothing (pass), a block, or rewritten arguments. */
export type ToolBeforeResult = void | undefined | { block: string } | { args: Record<string, unknown> };

export interface HookPayloads {
  tool_before: ToolCallContext;
  tool_after: ToolCallContext & { ok: boolean; result?: unknown; error?: string };
  run_start: { taskId: number; runId: number; agent: string; resumed: boolean };
  run_end: { taskId: number; runId: number; agent: string; phase: string; stopReason: string };
  task_transition: { taskId: number; from: string; to: string; actor: string };
  session_reset: { taskId: number; runId: number; reason: string };
}

export type HookHandler<H extends HookName> = (payload: HookPayloads[H]) => H extends 'tool_before' ? ToolBeforeResult | Promise<ToolBeforeResult> : void | Promise<void>;

/** What a verifier scores: one planner answer in its context. */
export interface VerifyInput {
  goal: string;
  decision: { action: string; tool?: string; args?: Record<string, unknown>; reason: string };
  taskId: number;
  runId: number;
}

/** 0 blocks the answer, 1 is weak (also blocked, counted apart), 2 or more passes. */
export type Verdict = number | { score: number; reason?: string };
export type Verifier = (input: VerifyInput) => Verdict | Promise<Verdict>;

export interface PluginApi {
  /** Registers a handler; throws once registration is closed. */
  on<H extends HookName>(hook: H, handler: HookHandler<H>): void;
  /** Registers a verifier of planner answers (the restart policy acts on its scores). */
  verifier(fn: Verifier): void;
}

export interface Plugin {
  name: string;
  /** Called once per thread with the plugin's options; must register its hooks through `api`. */
  register(api: PluginApi, options: Record<string, unknown>): void | Promise<void>;
}

interface Registered {
  plugin: string;
  handler: (payload: never) => unknown;
}

export type GateHookVerdict = { ok: true; args: Record<string, unknown> } | { ok: false; reason: string };

export interface HookRegistry {
  /** Loads one plugin; refuses a plugin that registered no hook (seed 002's silent bug). */
  use(plugin: Plugin, options?: Record<string, unknown>): Promise<void>;
  /** Closes registration: the runtime is starting. */
  close(): void;
  readonly plugins: string[];
  /** Runs `tool_before` hooks in order; fails closed. */
  toolBefore(ctx: ToolCallContext, timeoutMs?: number): Promise<GateHookVerdict>;
  /** Scores an answer with every verifier; the lowest score wins. Null when none is registered. A verifier that throws scores 0. */
  verify(input: VerifyInput): Promise<{ score: number; reason: string; plugin: string } | null>;
  /** Runs observer hooks; a failure is reported, never thrown into the loop. */
  emit<H extends Exclude<HookName, 'tool_before'>>(hook: H, payload: HookPayloads[H]): Promise<void>;
}

export interface HookRegistryOptions {
  /** Reports an observer hook that failed. @defaultValue writes to stderr */
  onError?: (plugin: string, hook: HookName, err: unknown) => void;
  /** Per-call timeout of a `tool_before` hook. @defaultValue 5000 */
  timeoutMs?: number;
}

export function createHookRegistry(opts: HookRegistryOptions = {}): HookRegistry {
  const handlers = new Map<HookName, Registered[]>(HOOK_NAMES.map((h) => [h, []]));
  const plugins: string[] = [];
  const verifiers: Array<{ plugin: string; fn: Verifier }> = [];
  let closed = false;
  const report =
    opts.onError ?? ((plugin, hook, err) => process.stderr.write(`taskloop: plugin ${plugin} failed in ${hook}: ${err instanceof Error ? err.message : String(err)}\n`));

  return {
    plugins,
    async use(plugin, options = {}) {
      if (closed) throw new Error(`plugin ${plugin.name}: registration is closed once the runtime has started`);
      if (typeof plugin?.name !== 'string' || typeof plugin.register !== 'function') {
        throw new Error('a plugin must export { name, register(api, options) }');
      }
      if (plugins.includes(plugin.name)) throw new Error(`plugin ${plugin.name} is loaded twice`);
      let count = 0;
      const api: PluginApi = {
        on(hook, handler) {
          if (closed) throw new Error(`plugin ${plugin.name}: cannot register ${hook} after start-up`);
          if (!HOOK_NAMES.includes(hook)) throw new Error(`plugin ${plugin.name}: unknown hook '${String(hook)}' (hooks: ${HOOK_NAMES.join(', ')})`);
          if (typeof handler !== 'function') throw new Error(`plugin ${plugin.name}: the ${hook} handler is not a function`);
          handlers.get(hook)!.push({ plugin: plugin.name, handler: handler as (payload: never) => unknown });
          count++;
        },
        verifier(fn) {
          if (closed) throw new Error(`plugin ${plugin.name}: cannot register a verifier after start-up`);
          if (typeof fn !== 'function') throw new Error(`plugin ${plugin.name}: the verifier is not a function`);
          verifiers.push({ plugin: plugin.name, fn });
          count++;
        },
      };
      await plugin.register(api, options);
      if (count === 0) throw new Error(`plugin ${plugin.name} registered no hooks: its register() never called api.on(...)`);
      plugins.push(plugin.name);
    },
    close() {
      closed = true;
    },
    async toolBefore(ctx, timeoutMs = opts.timeoutMs ?? 5000) {
      let args = ctx.args;
      for (const { plugin, handler } of handlers.get('tool_before')!) {
        if (ctx.signal.aborted) return { ok: false, reason: `plugin ${plugin}: the call was aborted before its tool_before hook; denied` };
        let timer: NodeJS.Timeout | undefined;
        let onAbort: (() => void) | undefined;
        try {
          const outcome = await Promise.race([
            Promise.resolve().then(() => (handler as (p: ToolCallContext) => ToolBeforeResult | Promise<ToolBeforeResult>)({ ...ctx, args })),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
              onAbort = () => reject(new Error('aborted'));
              ctx.signal.addEventListener('abort', onAbort, { once: true });
            }),
          ]);
          if (outcome !== undefined && outcome !== null && typeof outcome === 'object') {
            if ('block' in outcome) return { ok: false, reason: `blocked by plugin ${plugin}: ${outcome.block}` };
            if ('args' in outcome && typeof outcome.args === 'object' && outcome.args !== null) args = outcome.args;
          }
        } catch (err) {
          return { ok: false, reason: `plugin ${plugin} failed in tool_before (${err instanceof Error ? err.message : String(err)}); denied` };
        } finally {
          clearTimeout(timer);
          if (onAbort !== undefined) ctx.signal.removeEventListener('abort', onAbort);
        }
      }
      return { ok: true, args };
    },
    async verify(input) {
      let worst: { score: number; reason: string; plugin: string } | null = null;
      for (const { plugin, fn } of verifiers) {
        let score: number;
        let reason: string;
        try {
          const verdict = await fn(input);
          score = typeof verdict === 'number' ? verdict : verdict.score;
          reason = typeof verdict === 'number' ? `score ${verdict}` : (verdict.reason ?? `score ${verdict.score}`);
          if (!Number.isFinite(score)) throw new Error(`returned ${String(score)}, not a score`);
        } catch (err) {
          score = 0;
          reason = `the verifier failed (${err instanceof Error ? err.message : String(err)})`;
        }
        if (worst === null || score < worst.score) worst = { score, reason, plugin };
      }
      return worst;
    },
    async emit(hook, payload) {
      for (const { plugin, handler } of handlers.get(hook)!) {
        try {
          await (handler as (p: typeof payload) => unknown)(payload);
        } catch (err) {
          report(plugin, hook, err);
        }
      }
    },
  };
}
