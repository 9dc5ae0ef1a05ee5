/**
 * Plans as working hypotheses (seed 004). A card's plan is a list of subgoals, each with the
 * actions allowed while it is current, the evidence that completes it (a successful call of
 * one of its `success_evidence` tools), and a failure policy: a failed call is retried at most
 * `transient` times (default 2), then the item — and the run — fails. The planner may replan:
 * change the items that are not done yet, and nothing else of the card.
 */
import { type TaskCard, cardSchema } from '../engine/index.js';
import type { PlanView } from './planner.js';

export type ItemStatus = 'pending' | 'in_progress' | 'done' | 'failed';

export interface PlanItem {
  id: string;
  goal: string;
  allowedActions: string[];
  successEvidence: string[];
  transient: number;
  status: ItemStatus;
  failures: number;
  evidence: string[];
}

export interface PlanState {
  items: PlanItem[];
  /** Bumped by every accepted replan. */
  version: number;
}

type RawItem = NonNullable<TaskCard['plan']>[number];

function toItem(raw: RawItem): PlanItem {
  return {
    id: raw.id,
    goal: raw.goal,
    allowedActions: raw.allowed_actions,
    successEvidence: raw.success_evidence,
    transient: raw.failure_policy?.transient ?? 2,
    status: raw.status === 'done' ? 'done' : 'pending',
    failures: 0,
    evidence: [],
  };
}

export function planFromCard(card: TaskCard): PlanState {
  return { items: (card.plan ?? []).map(toItem), version: 0 };
}

export function currentItem(plan: PlanState): PlanItem | undefined {
  return plan.items.find((i) => i.status !== 'done' && i.status !== 'failed');
}

/** A refusal when the tool is not an allowed action of the current item, else null. */
export function checkPlanAction(plan: PlanState, tool: string): string | null {
  const item = currentItem(plan);
  if (item === undefined || item.allowedActions.length === 0 || item.allowedActions.includes(tool)) return null;
  return `${tool} is not an allowed action of plan item ${item.id} (${item.allowedActions.join(', ')})`;
}

/** Folds one executed call into the plan; returns the item that failed for good, if any. */
export function recordPlanCall(plan: PlanState, tool: string, ok: boolean, seq: number): PlanItem | undefined {
  const item = currentItem(plan);
  if (item === undefined) return undefined;
  item.status = 'in_progress';
  if (ok) {
    if (item.successEvidence.includes(tool)) {
      item.evidence.push(`${tool} at step ${seq}`);
      item.status = 'done';
    }
    return undefined;
  }
  item.failures++;
  if (item.failures > item.transient) {
    item.status = 'failed';
    return item;
  }
  return undefined;
}

/** The card fields a replan may never touch (seed 004): scope, allowlist, budget, approvals, termination rules. */
export const FROZEN = ['goal', 'planner', 'model', 'allowed_tools', 'observe', 'scope', 'budget', 'approval', 'final_state', 'acceptance', 'loop', 'script', 'launch_allowlist'];

/** The most items a replan may propose (a planner's answer is untrusted, and each item reaches every later prompt). */
export const MAX_REPLAN_ITEMS = 100;

/** Fields of an item the loop keeps from evidence; a replan may not set them. */
const LOOP_OWNED = ['status', 'evidence', 'failures'];

const cardItem = cardSchema.shape.plan.unwrap().element;
/**
 * A replanned item: the card's own plan-item schema (strict, `transient` within its bounds),
 * less `status` — only evidence completes an item — and with `success_evidence` held to tool
 * names like `allowed_actions`, since evidence is a call of one of those tools.
 */
const replanItem = cardItem.omit({ status: true }).extend({ success_evidence: cardItem.shape.allowed_actions });

export type ReplanOutcome = { ok: true } | { ok: false; problems: string[] };

/** An item as the planner is shown it (the card's own field names). */
export function planView(item: PlanItem): PlanView {
  return { id: item.id, goal: item.goal, status: item.status, allowed_actions: item.allowedActions, success_evidence: item.successEvidence };
}

const sameList = (a: string[], b: string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** How a proposed item differs from a done one, field by field. */
function rewrites(done: PlanItem, proposed: PlanItem): string[] {
  const changed: string[] = [];
  if (proposed.goal !== done.goal) changed.push('goal');
  if (!sameList(proposed.allowedActions, done.allowedActions)) changed.push('allowed_actions');
  if (!sameList(proposed.successEvidence, done.successEvidence)) changed.push('success_evidence');
  if (proposed.transient !== done.transient) changed.push('failure_policy');
  return changed;
}

/**
 * Applies a proposed card change (a planner's, so untrusted): only `plan`, every item parsed
 * strictly by the replan item schema. Items already done must be kept, as they are: they
 * keep their status and evidence. An item kept by id keeps its failure count, so a replan
 * does not reset retries. Any problem refuses the whole replan and leaves the plan unchanged.
 */
export function replan(plan: PlanState, proposed: Record<string, unknown>): ReplanOutcome {
  const problems = Object.keys(proposed)
    .filter((k) => k !== 'plan')
    .map((k) => (FROZEN.includes(k) ? `replanning may not change ${k}` : `a replan may only change plan, not ${k}`));
  const items = proposed.plan;
  if (!Array.isArray(items)) problems.push('a replan must carry plan: the new list of plan items');
  else if (items.length > MAX_REPLAN_ITEMS) problems.push(`plan: a replan may propose at most ${MAX_REPLAN_ITEMS} items, not ${items.length}`);
  if (problems.length > 0 || !Array.isArray(items)) return { ok: false, problems };

  const next: PlanItem[] = [];
  const seen = new Set<string>();
  items.forEach((raw: unknown, n) => {
    const where = `plan.${n}`;
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
      problems.push(`${where}: a plan item is an object with an id and a goal`);
      return;
    }
    const owned = LOOP_OWNED.filter((k) => Object.hasOwn(raw, k));
    for (const k of owned) problems.push(`${where}.${k}: kept by the loop from evidence; a replan may not set it`);
    const rest = Object.fromEntries(Object.entries(raw).filter(([k]) => !LOOP_OWNED.includes(k)));
    const parsed = replanItem.safeParse(rest);
    if (!parsed.success) {
      for (const issue of parsed.error.issues) problems.push(`${[where, ...issue.path].join('.')}: ${issue.message}`);
      return;
    }
    if (owned.length > 0) return;
    const item = toItem({ ...parsed.data, status: 'pending' });
    if (seen.has(item.id)) {
      problems.push(`${where}.id: plan item ${item.id} appears twice`);
      return;
    }
    seen.add(item.id);
    const kept = plan.items.find((i) => i.id === item.id);
    if (kept?.status === 'done') {
      const changed = rewrites(kept, item);
      if (changed.length > 0) problems.push(`${where}: plan item ${kept.id} is done and may not be rewritten (${changed.join(', ')} changed)`);
      next.push(kept);
      return;
    }
    if (kept !== undefined) {
      item.failures = kept.failures;
      item.status = kept.status;
    }
    next.push(item);
  });
  const dropped = plan.items.filter((i) => i.status === 'done' && !next.includes(i));
  if (dropped.length > 0) problems.push(`plan: a replan may not drop done items (${dropped.map((i) => i.id).join(', ')})`);
  if (problems.length > 0) return { ok: false, problems };
  plan.items = next;
  plan.version++;
  return { ok: true };
}

export interface ProgressVector {
  subgoals_done: number;
  subgoals_total: number;
  open_questions: number;
  verified_evidence: number;
  state_version: number;
  consecutive_failures: number;
}

export function progressVector(plan: PlanState, extra: { openQuestions: number; evidence: number; stateVersion: number; consecutiveFailures: number }): ProgressVector {
  return {
    subgoals_done: plan.items.filter((i) => i.status === 'done').length,
    subgoals_total: plan.items.length,
    open_questions: extra.openQuestions,
    verified_evidence: extra.evidence,
    state_version: extra.stateVersion,
    consecutive_failures: extra.consecutiveFailures,
  };
}
