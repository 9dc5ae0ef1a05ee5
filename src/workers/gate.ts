/**
 * The gate every proposed tool call passes before it runs, in order (DESIGN §5):
 * allowlist → argument schema → the tool's own admission check (e.g. launch_app's
 * allowlist) → scope → write budget → breaker → tool_before hooks.
 * (Approval follows in the loop.) It fails closed: a check that cannot be made denies.
 */
import { type Budget, type BreakerPolicy, type RunStore, type TaskCard, type Usage, isEngineError } from '../engine/index.js';
import type { HookRegistry, ToolCallContext } from '../plugins/hooks.js';
import type { Tool, ToolRegistry } from '../tools/registry.js';
import { writeAllowed } from './budget.js';

export type GateVerdict =
  | { ok: true; tool: Tool; args: Record<string, unknown>; probe: boolean }
  /** `end` set: the refusal ends the run (a tripped breaker, a spent write budget). */
  | { ok: false; reason: string; end?: { phase: 'failed' | 'budget_exhausted'; stopReason: string } };

export interface GateInput {
  card: TaskCard;
  tools: ToolRegistry;
  runs: RunStore;
  breakerPolicy: BreakerPolicy;
  budget: Budget;
  usage: Usage;
  toolName: string;
  rawArgs: unknown;
  hooks: HookRegistry;
  /** The current plan item's refusal of this tool, if any (it narrows the allowlist). */
  planRefusal?: string | null;
  /** What the hooks see of the call besides the tool and its arguments. */
  call: Omit<ToolCallContext, 'tool' | 'kind' | 'risk' | 'args'>;
}

export async function gate(input: GateInput): Promise<GateVerdict> {
  const { card, toolName } = input;
  if (!card.allowed_tools.includes(toolName)) {
    return { ok: false, reason: `${toolName} is not in the card's allowed_tools (${card.allowed_tools.join(', ')})` };
  }
  if (input.planRefusal !== undefined && input.planRefusal !== null) return { ok: false, reason: input.planRefusal };
  const tool = input.tools.get(toolName);
  if (tool === undefined) return { ok: false, reason: `${toolName} is not a registered tool` };
  let args: Record<string, unknown>;
  try {
    args = tool.parse(input.rawArgs);
  } catch (err) {
    return { ok: false, reason: isEngineError(err) ? err.message : String(err) };
  }
  const admission = tool.admit(args, card);
  if (admission !== null) return { ok: false, reason: admission };
  if (tool.kind === 'write') {
    const scopeProblem = checkScope(tool, args, card);
    if (scopeProblem !== null) return { ok: false, reason: scopeProblem };
    if (!writeAllowed(input.budget, input.usage)) {
      return { ok: false, reason: `the write budget of ${input.budget.maxWriteCalls} calls is spent`, end: { phase: 'budget_exhausted', stopReason: 'max_write_calls' } };
    }
  }
  let verdict;
  try {
    verdict = await input.runs.breakerAcquire(toolName, input.breakerPolicy);
  } catch (err) {
    return { ok: false, reason: `the breaker of ${toolName} cannot be read (${String(err)}); denied`, end: { phase: 'failed', stopReason: 'breaker' } };
  }
  if (!verdict.allowed) {
    return { ok: false, reason: `tool ${toolName} is tripped (breaker ${verdict.state}); the run ends`, end: { phase: 'failed', stopReason: 'breaker' } };
  }
  const hooked = await input.hooks.toolBefore({ ...input.call, tool: tool.name, kind: tool.kind, risk: tool.risk, args });
  if (!hooked.ok) return { ok: false, reason: hooked.reason };
  // A hook may rewrite the arguments; the rewrite passes the same schema and scope checks.
  if (hooked.args !== args) {
    try {
      args = tool.parse(hooked.args);
    } catch (err) {
      return { ok: false, reason: `a tool_before hook rewrote the arguments into invalid ones: ${isEngineError(err) ? err.message : String(err)}` };
    }
    const scopeProblem = tool.admit(args, card) ?? (tool.kind === 'write' ? checkScope(tool, args, card) : null);
    if (scopeProblem !== null) return { ok: false, reason: `a tool_before hook rewrote the arguments out of scope: ${scopeProblem}` };
  }
  return { ok: true, tool, args, probe: verdict.probe };
}

/** A write tool's target must be listed under its scope key in the card. */
export function checkScope(tool: Tool, args: Record<string, unknown>, card: TaskCard): string | null {
  if (tool.target === null) return null;
  const target = args[tool.target.arg];
  const allowed = card.scope[tool.target.scope];
  if (allowed === undefined) return `${tool.name} writes ${tool.target.arg}, but the card has no scope.${tool.target.scope}`;
  if (typeof target !== 'string' || !allowed.includes(target)) {
    return `${tool.name}: ${tool.target.arg} ${JSON.stringify(target)} is outside scope.${tool.target.scope} (${allowed.join(', ')})`;
  }
  return null;
}
