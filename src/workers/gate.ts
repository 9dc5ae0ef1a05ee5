/**
 * The gate: one ordered chain every tool call a planner proposes passes before it runs,
 * a fresh call and an approved call resumed after its wait alike (DESIGN §5):
 *
 *   allowlist → arguments → scope → budget → breaker → hooks → approval
 *
 * Each link is middleware-shaped, `(call, next) => verdict`, composed as hono's `compose`
 * is: a link refuses by returning without calling `next`, and calling `next` twice is a bug
 * that fails the call. It fails closed: a check that cannot be made (a breaker table that
 * cannot be read, a hook that throws or times out) denies.
 *
 * The approval link is last, so the call it freezes (or checks against a grant) is the
 * call as it would run, after the hooks' rewrites. A call that needs an approval parks
 * unless it carries a granted one whose fingerprint is exactly this call's.
 */
import { type Approval, type Budget, type BreakerPolicy, type RunStore, type TaskCard, type Usage, isEngineError } from '../engine/index.js';
import type { HookRegistry, ToolCallContext } from '../plugins/hooks.js';
import type { Tool, ToolRegistry } from '../tools/registry.js';
import { writeAllowed } from './budget.js';
import { fingerprint } from './loop-context.js';

export type GateVerdict =
  | { kind: 'run'; tool: Tool; args: Record<string, unknown>; probe: boolean }
  /** `end` set: the refusal ends the run (a tripped breaker, a spent budget). */
  | { kind: 'refuse'; link: GateLink | 'gate'; reason: string; end?: { phase: 'failed' | 'budget_exhausted'; stopReason: string } }
  /** The call needs a person's approval: freeze exactly this call. */
  | { kind: 'park'; tool: Tool; args: Record<string, unknown>; fingerprint: string };

export interface GateInput {
  card: TaskCard;
  tools: ToolRegistry;
  runs: RunStore;
  breakerPolicy: BreakerPolicy;
  budget: Budget;
  usage: Usage;
  /** The clock (ms since the epoch) the budget's deadline is read against: at the budget link, and again after the hooks, which may take seconds. */
  now: () => number;
  toolName: string;
  rawArgs: unknown;
  hooks: HookRegistry;
  /** The current plan item's refusal of this tool, if any (it narrows the allowlist). */
  planRefusal?: string | null;
  /** What the hooks see of the call besides the tool and its arguments. */
  call: Omit<ToolCallContext, 'tool' | 'kind' | 'risk' | 'args'>;
  /** A granted approval this call claims to be (a resumed, approved call). */
  approval?: Approval;
  /**
   * The call began before, and is carried out again under its key (an interrupted idempotent
   * write or read, an approved call whose approval was used): not a new write, so the
   * deadline does not refuse it; refusing would record as not done a call that may be.
   */
  continued?: boolean;
}

/** A call as it moves down the chain: the links fill in the tool and its parsed arguments. */
interface GateCall extends GateInput {
  tool: Tool;
  args: Record<string, unknown>;
  probe: boolean;
}

export const GATE_LINKS = ['allowlist', 'arguments', 'scope', 'budget', 'breaker', 'hooks', 'approval'] as const;
export type GateLink = (typeof GATE_LINKS)[number];

/** A link's verdict: synchronous links answer at once, so a call that meets no async link allocates no promise. */
type Verdict = GateVerdict | Promise<GateVerdict>;
type Next = () => Verdict;
type Link = (c: GateCall, next: Next) => Verdict;

const refuse = (link: GateLink | 'gate', reason: string, end?: Extract<GateVerdict, { kind: 'refuse' }>['end']): GateVerdict => ({ kind: 'refuse', link, reason, end });
const message = (err: unknown): string => (isEngineError(err) || err instanceof Error ? err.message : String(err));

/** Whether a call of this tool waits for a person: high-risk tools always, and what the card lists. */
export function needsApproval(tool: Tool, card: TaskCard): boolean {
  return tool.risk === 'high' || (card.approval?.tools ?? []).includes(tool.name);
}

const LINKS: Record<GateLink, Link> = {
  allowlist(c, next) {
    if (!c.card.allowed_tools.includes(c.toolName)) {
      return refuse('allowlist', `${c.toolName} is not in the card's allowed_tools (${c.card.allowed_tools.join(', ')})`);
    }
    if (c.planRefusal !== undefined && c.planRefusal !== null) return refuse('allowlist', c.planRefusal);
    const tool = c.tools.get(c.toolName);
    if (tool === undefined) return refuse('allowlist', `${c.toolName} is not a registered tool`);
    c.tool = tool;
    return next();
  },
  arguments(c, next) {
    try {
      c.args = c.tool.parse(c.rawArgs);
    } catch (err) {
      return refuse('arguments', message(err));
    }
    return next();
  },
  scope(c, next) {
    const problem = admitted(c.tool, c.args, c.card);
    return problem === null ? next() : refuse('scope', problem);
  },
  budget(c, next) {
    if (c.tool.kind !== 'write') return next();
    if (!writeAllowed(c.budget, c.usage)) {
      return refuse('budget', `the write budget of ${c.budget.maxWriteCalls} calls is spent`, { phase: 'budget_exhausted', stopReason: 'max_write_calls' });
    }
    return pastDeadline(c) ?? next();
  },
  async breaker(c, next) {
    let verdict;
    try {
      verdict = await c.runs.breakerAcquire(c.tool.name, c.breakerPolicy);
    } catch (err) {
      return refuse('breaker', `the breaker of ${c.tool.name} cannot be read (${message(err)}); denied`, { phase: 'failed', stopReason: 'breaker' });
    }
    if (!verdict.allowed) return refuse('breaker', `tool ${c.tool.name} is tripped (breaker ${verdict.state}); the run ends`, { phase: 'failed', stopReason: 'breaker' });
    c.probe = verdict.probe;
    return next();
  },
  hooks(c, next) {
    // No tool_before hook for this kind of tool: nothing to wait for, and no promise either.
    return c.hooks.has('tool_before', c.tool.kind) ? hooked(c, next) : next();
  },
  approval(c, next) {
    if (c.approval !== undefined) {
      // Checked at execution: the call that runs is exactly the call a person approved.
      if (c.approval.state !== 'approved') return refuse('approval', `approval ${c.approval.id} is ${c.approval.state}, not approved`);
      if (c.approval.tool !== c.tool.name || c.approval.fingerprint !== fingerprint(c.call.taskId, c.tool.name, c.args)) {
        return refuse('approval', `the call does not match approval ${c.approval.id}: a changed call needs an approval of its own`);
      }
      return next();
    }
    if (!needsApproval(c.tool, c.card)) return next();
    if (c.budget.maxPending !== null && c.usage.pending >= c.budget.maxPending) {
      return refuse('approval', `the budget of ${c.budget.maxPending} pending approvals is spent`, { phase: 'budget_exhausted', stopReason: 'max_pending' });
    }
    return { kind: 'park', tool: c.tool, args: c.args, fingerprint: fingerprint(c.call.taskId, c.tool.name, c.args) };
  },
};

/**
 * The loop checks the deadline between steps; a write can reach the gate later than that
 * (after a slow decision, or approved by a person long after the run's time ran out), and
 * none starts once it has passed. Reads still may (acceptance reads the final state), and so
 * may a begun call carried on (`continued`). A refusal, or null.
 */
function pastDeadline(c: GateCall): GateVerdict | null {
  if (c.tool.kind !== 'write' || c.budget.deadlineAt === null || c.continued === true) return null;
  const now = c.now();
  if (now < c.budget.deadlineAt) return null;
  return refuse('budget', `the run's deadline passed ${Math.round((now - c.budget.deadlineAt) / 1000)} s ago: no write starts after it`, { phase: 'budget_exhausted', stopReason: 'deadline' });
}

/** The tool_before hooks' verdict on a call: a rewrite passes the same schema and scope checks. */
async function hooked(c: GateCall, next: Next): Promise<GateVerdict> {
  const verdict = await c.hooks.toolBefore({ ...c.call, tool: c.tool.name, kind: c.tool.kind, risk: c.tool.risk, args: c.args });
  if (!verdict.ok) return refuse('hooks', verdict.reason);
  // A hook may take seconds (up to its time box): the deadline is read again after it.
  const late = pastDeadline(c);
  if (late !== null) return late;
  if (verdict.args !== c.args) {
    // A rewrite passes the same schema and scope checks as the planner's arguments.
    try {
      c.args = c.tool.parse(verdict.args);
    } catch (err) {
      return refuse('hooks', `a tool_before hook rewrote the arguments into invalid ones: ${message(err)}`);
    }
    const problem = admitted(c.tool, c.args, c.card);
    if (problem !== null) return refuse('hooks', `a tool_before hook rewrote the arguments out of scope: ${problem}`);
  }
  return next();
}

/** Composes links into one chain (hono's compose): each runs at most once, in order. */
function compose(links: readonly Link[], last: (c: GateCall) => GateVerdict): (c: GateCall) => Verdict {
  return (c) => {
    let index = -1;
    const dispatch = (i: number): Verdict => {
      if (i <= index) throw new Error('gate: next() called twice in one link');
      index = i;
      const link = links[i];
      return link === undefined ? last(c) : link(c, () => dispatch(i + 1));
    };
    return dispatch(0);
  };
}

const chain = compose(
  GATE_LINKS.map((name) => LINKS[name]),
  (c) => ({ kind: 'run', tool: c.tool, args: c.args, probe: c.probe }),
);

export async function gate(input: GateInput): Promise<GateVerdict> {
  try {
    // tool and args are set by the allowlist and arguments links before any later link reads them.
    return await chain({ ...input, tool: undefined as unknown as Tool, args: {}, probe: false });
  } catch (err) {
    return refuse('gate', `the gate failed (${message(err)}); denied`);
  }
}

/** The tool's own admission check (e.g. launch_app's allowlist), then the card's scope for a write. */
function admitted(tool: Tool, args: Record<string, unknown>, card: TaskCard): string | null {
  return tool.admit(args, card) ?? (tool.kind === 'write' ? checkScope(tool, args, card) : null);
}

/** A write tool's target must be listed under its scope key in the card. */
export function checkScope(tool: Tool, args: Record<string, unknown>, card: TaskCard): string | null {
  if (tool.target === null) return null;
  const target = args[tool.target.arg];
  const allowed = Object.hasOwn(card.scope, tool.target.scope) ? card.scope[tool.target.scope] : undefined;
  if (allowed === undefined) return `${tool.name} writes ${tool.target.arg}, but the card has no scope.${tool.target.scope}`;
  if (typeof target !== 'string' || !allowed.includes(target)) {
    return `${tool.name}: ${tool.target.arg} ${JSON.stringify(target)} is outside scope.${tool.target.scope} (${allowed.join(', ')})`;
  }
  return null;
}
