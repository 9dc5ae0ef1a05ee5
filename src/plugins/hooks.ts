/**
 * Hooks and plugins (DESIGN §6, seed 002). A closed set of hook names; plugins register
 * explicitly through the API they are given, and registration closes once the runtime
 * starts. Hooks run in registration order and are awaited. `tool_before` hooks may block
 * a call or rewrite its arguments, and they fail closed: a hook that throws, times out or
 * is aborted denies the call, with a message that names the plugin.
 *
 * Every hook call — `tool_before`, each observer hook, each verifier — is time-boxed
 * (timebox.ts) and gets `signal`, its own AbortSignal, which fires when its time limit
 * passes or the run's signal aborts. Callers pass the run's signal as `signal` (optional
 * for observers and verifiers); the handler sees the hook's signal in its place.
 */
import { type Boxed, describeFailure, timebox } from './timebox.js';
import { oneLine, printable } from '../engine/text.js';

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
  /**
   * In a hook's payload: the hook's signal, fired at its time limit or when the run is
   * stopped. Given to `toolBefore` / `emit`: the run's signal, from which the hook's derives.
   */
  signal: AbortSignal;
  /** What the runtime offers (e.g. `manager`, a TaskManager). */
  services: Record<string, unknown>;
}

/** What a `tool_before` hook may answer: nothing (pass), a block, or rewritten arguments. */
export type ToolBeforeResult = void | undefined | { block: string } | { args: Record<string, unknown> };

export interface HookPayloads {
  tool_before: ToolCallContext;
  tool_after: ToolCallContext & { ok: boolean; result?: unknown; error?: string };
  run_start: { taskId: number; runId: number; agent: string; resumed: boolean; signal: AbortSignal };
  run_end: { taskId: number; runId: number; agent: string; phase: string; stopReason: string; signal: AbortSignal };
  task_transition: { taskId: number; from: string; to: string; actor: string; signal: AbortSignal };
  session_reset: { taskId: number; runId: number; reason: string; signal: AbortSignal };
}

export type ObserverHook = Exclude<HookName, 'tool_before'>;

/** What a caller hands the registry: a payload whose `signal`, if any, is the run's. */
export type WithRunSignal<T> = Omit<T, 'signal'> & { signal?: AbortSignal };

export type HookHandler<H extends HookName> = (payload: HookPayloads[H]) => H extends 'tool_before' ? ToolBeforeResult | Promise<ToolBeforeResult> : void | Promise<void>;

/** What a verifier scores: one planner answer in its context. */
export interface VerifyInput {
  goal: string;
  decision: { action: string; tool?: string; args?: Record<string, unknown>; reason: string };
  taskId: number;
  runId: number;
  /** The verifier's signal, fired at its time limit or when the run is stopped. */
  signal: AbortSignal;
}

/** 0 blocks the answer, 1 is weak (also blocked, counted apart), 2 or more passes. */
export type Verdict = number | { score: number; reason?: string };
export type Verifier = (input: VerifyInput) => Verdict | Promise<Verdict>;

/** A tool hook's filter (`tool_before`, `tool_after`). */
export interface ToolHookOptions {
  /**
   * The kinds of tool whose calls the handler sees; calls of other kinds skip it at no cost
   * (no payload, no copy of the arguments, no time box). @defaultValue every kind
   */
  kinds?: ReadonlyArray<ToolCallContext['kind']>;
}

export interface PluginApi {
  /** Registers a handler; throws once registration is closed. `options` filter a tool hook's calls. */
  on<H extends HookName>(hook: H, handler: HookHandler<H>, options?: H extends 'tool_before' | 'tool_after' ? ToolHookOptions : never): void;
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
  /** The tool kinds a tool hook sees (undefined: all). */
  kinds?: ReadonlySet<string>;
}

const TOOL_KINDS = ['read', 'write'] as const;
/** Whether a handler sees a call of `kind`; a kind it cannot know (a tool built by hand) is seen: filters fail closed. */
const sees = (r: Registered, kind: string | undefined): boolean =>
  kind === undefined || r.kinds === undefined || r.kinds.has(kind) || !(TOOL_KINDS as readonly string[]).includes(kind);

export type GateHookVerdict = { ok: true; args: Record<string, unknown> } | { ok: false; reason: string };

export interface HookRegistry {
  /** Loads one plugin; refuses a plugin that registered no hook (seed 002's silent bug). */
  use(plugin: Plugin, options?: Record<string, unknown>): Promise<void>;
  /** Closes registration: the runtime is starting. */
  close(): void;
  readonly plugins: string[];
  /**
   * Whether any plugin registered `hook` (the loop builds no payload for a hook nobody
   * listens to); for a tool hook with `kind`, whether any handler sees calls of that kind.
   */
  has(hook: HookName, kind?: ToolCallContext['kind']): boolean;
  /**
   * Runs `tool_before` hooks in order, each within `timeoutMs`; fails closed. `ctx.signal`
   * is the run's. A hook that was cut (timed out, aborted) has no effect on the chain: its
   * late answer is dropped and the call is denied. Each hook gets its own copy of the
   * arguments, so only a returned `{args}` rewrites them.
   */
  toolBefore(ctx: ToolCallContext, timeoutMs?: number): Promise<GateHookVerdict>;
  /**
   * Scores an answer with every verifier, each within `timeoutMs`; the lowest score wins.
   * Null when none is registered. A verifier that throws, times out or is aborted scores 0.
   */
  verify(input: WithRunSignal<VerifyInput>): Promise<{ score: number; reason: string; plugin: string } | null>;
  /**
   * Runs observer hooks in order, each within `observerTimeoutMs`; a failure or a timeout is
   * reported through `onError`, never thrown into the loop, and the next hook still runs.
   * Resolves within (number of handlers) × `observerTimeoutMs` whatever the handlers do. A
   * stop of the run fires the handlers' signals but does not cut the wait: a stopped run's
   * observers are still told.
   */
  emit<H extends ObserverHook>(hook: H, payload: WithRunSignal<HookPayloads[H]>): Promise<void>;
}

export interface HookRegistryOptions {
  /**
   * Reports an observer hook that threw or timed out (`err` is then a `TimeoutError`).
   * @defaultValue writes one line to stderr
   */
  onError?: (plugin: string, hook: HookName, err: unknown) => void;
  /** Time limit of one `tool_before` hook call and of one verifier call, in ms. @defaultValue 5000 */
  timeoutMs?: number;
  /**
   * Time limit of one observer hook call (`tool_after`, `run_start`, `run_end`,
   * `task_transition`, `session_reset`), in ms. Longer than a gate's: observers report
   * outward (a webhook, a log shipper) and decide nothing, yet each is awaited in turn, so
   * a stuck one costs a run at most this long per call. @defaultValue 10000
   */
  observerTimeoutMs?: number;
}

/** @see HookRegistryOptions.timeoutMs */
export const DEFAULT_HOOK_TIMEOUT_MS = 5000;
/** @see HookRegistryOptions.observerTimeoutMs */
export const DEFAULT_OBSERVER_TIMEOUT_MS = 10_000;

/** The longest timer Node keeps: past it, setTimeout fires after 1 ms. */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

function checkTimeout(name: string, ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0 || ms > MAX_TIMEOUT_MS) {
    throw new Error(`hook registry: ${name} must be a positive number of milliseconds up to ${MAX_TIMEOUT_MS}, not ${String(ms)}`);
  }
  return ms;
}

/**
 * A hook's own copy of the arguments (null when they hold what cannot be copied). With a
 * copy, mutating its payload in place changes nothing — not even after the hook was cut —
 * and a rewrite is always a new object, which the gate parses and scope-checks again.
 */
function copyArgs(args: Record<string, unknown>): Record<string, unknown> | null {
  try {
    return structuredClone(args);
  } catch {
    return null;
  }
}

/** Why a cut or failed call failed, in the words of a denial or a report. */
function failure(outcome: Exclude<Boxed<unknown>, { ok: true }>): string {
  return outcome.aborted ? 'aborted' : describeFailure(outcome.error);
}

/** A tool hook's `kinds`, checked at registration (a typo must not silently skip every call). */
function kindsOf(plugin: string, hook: HookName, options: ToolHookOptions | undefined): ReadonlySet<string> | undefined {
  if (options === undefined || options === null) return undefined;
  if (hook !== 'tool_before' && hook !== 'tool_after') throw new Error(`plugin ${plugin}: ${hook} takes no options (only tool_before and tool_after filter by kinds)`);
  const { kinds } = options;
  if (kinds === undefined) return undefined;
  // Array.from fills a sparse array's holes with undefined, which then fails the check.
  const listed: unknown[] = Array.isArray(kinds) ? Array.from(kinds) : [];
  if (listed.length === 0 || !listed.every((k) => (TOOL_KINDS as readonly unknown[]).includes(k))) {
    throw new Error(`plugin ${plugin}: ${hook} kinds must be a non-empty list of ${TOOL_KINDS.join(', ')}, not ${JSON.stringify(kinds)}`);
  }
  return new Set(listed as string[]);
}

export function createHookRegistry(opts: HookRegistryOptions = {}): HookRegistry {
  const handlers = new Map<HookName, Registered[]>(HOOK_NAMES.map((h) => [h, []]));
  const plugins: string[] = [];
  const verifiers: Array<{ plugin: string; fn: Verifier }> = [];
  const gateTimeout = checkTimeout('timeoutMs', opts.timeoutMs ?? DEFAULT_HOOK_TIMEOUT_MS);
  const observerTimeout = checkTimeout('observerTimeoutMs', opts.observerTimeoutMs ?? DEFAULT_OBSERVER_TIMEOUT_MS);
  let closed = false;
  const report =
    opts.onError ??
    // A plugin's error may quote what an agent wrote: one line, escaped, on the operator's terminal.
    ((plugin, hook, err) => process.stderr.write(`taskloop: plugin ${printable(plugin)} failed in ${hook}: ${printable(oneLine(describeFailure(err)))}\n`));

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
        on(hook, handler, options) {
          if (closed) throw new Error(`plugin ${plugin.name}: cannot register ${hook} after start-up`);
          if (!HOOK_NAMES.includes(hook)) throw new Error(`plugin ${plugin.name}: unknown hook '${String(hook)}' (hooks: ${HOOK_NAMES.join(', ')})`);
          if (typeof handler !== 'function') throw new Error(`plugin ${plugin.name}: the ${hook} handler is not a function`);
          handlers.get(hook)!.push({ plugin: plugin.name, handler: handler as (payload: never) => unknown, kinds: kindsOf(plugin.name, hook, options) });
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
    has: (hook, kind) => handlers.get(hook)!.some((r) => sees(r, kind)),
    async toolBefore(ctx, timeoutMs = gateTimeout) {
      checkTimeout('timeoutMs', timeoutMs);
      let args = ctx.args;
      for (const registered of handlers.get('tool_before')!) {
        if (!sees(registered, ctx.kind)) continue;
        const { plugin, handler } = registered;
        if (ctx.signal.aborted) return { ok: false, reason: `plugin ${plugin}: the call was aborted before its tool_before hook; denied` };
        const hook = handler as (p: ToolCallContext) => ToolBeforeResult | Promise<ToolBeforeResult>;
        const snapshot = copyArgs(args);
        if (snapshot === null) return { ok: false, reason: `plugin ${plugin}: the arguments cannot be copied for its tool_before hook; denied` };
        const outcome = await timebox((signal) => hook({ ...ctx, args: snapshot, signal }), { ms: timeoutMs, parent: ctx.signal, cutOnAbort: true });
        if (!outcome.ok) return { ok: false, reason: `plugin ${plugin} failed in tool_before (${failure(outcome)}); denied` };
        const answer = outcome.value;
        if (answer !== undefined && answer !== null && typeof answer === 'object') {
          if ('block' in answer) return { ok: false, reason: `blocked by plugin ${plugin}: ${String(answer.block)}` };
          if ('args' in answer && typeof answer.args === 'object' && answer.args !== null) {
            const rewritten = copyArgs(answer.args);
            if (rewritten === null) return { ok: false, reason: `plugin ${plugin} rewrote the arguments into values that cannot be copied; denied` };
            args = rewritten;
          }
        }
      }
      return { ok: true, args };
    },
    async verify(input) {
      let worst: { score: number; reason: string; plugin: string } | null = null;
      const { signal: runSignal, ...rest } = input;
      for (const { plugin, fn } of verifiers) {
        const outcome = await timebox((signal) => fn({ ...rest, signal }), { ms: gateTimeout, parent: runSignal, cutOnAbort: true });
        let score = 0;
        let reason: string;
        if (!outcome.ok) {
          reason = outcome.timedOut ? `the verifier ${failure(outcome)}` : `the verifier failed (${failure(outcome)})`;
        } else {
          const verdict = outcome.value;
          const raw = typeof verdict === 'number' ? verdict : verdict?.score;
          if (typeof raw === 'number' && Number.isFinite(raw)) {
            score = raw;
            reason = typeof verdict === 'number' ? `score ${verdict}` : (verdict.reason ?? `score ${raw}`);
          } else {
            reason = `the verifier failed (returned ${String(raw)}, not a score)`;
          }
        }
        if (worst === null || score < worst.score) worst = { score, reason, plugin };
      }
      return worst;
    },
    async emit(hook, payload) {
      const { signal: runSignal, ...rest } = payload;
      const kind = hook === 'tool_after' ? (rest as { kind?: ToolCallContext['kind'] }).kind : undefined;
      for (const registered of handlers.get(hook)!) {
        if (!sees(registered, kind)) continue;
        const { plugin, handler } = registered;
        const observe = handler as (p: unknown) => unknown;
        const outcome = await timebox((signal) => observe({ ...rest, signal }), { ms: observerTimeout, parent: runSignal, cutOnAbort: false });
        if (!outcome.ok) {
          try {
            report(plugin, hook, outcome.error);
          } catch {
            // A throwing reporter must not turn an observer's failure into the loop's.
          }
        }
      }
    },
  };
}
