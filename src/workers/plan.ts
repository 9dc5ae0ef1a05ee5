/**
 * Plans as working hypotheses (seed 004). A card's plan is a list of subgoals, each with the
 * actions allowed while it is current, the evidence that completes it (a successful call of
 * one of its `success_evidence` tools), and a failure policy: a failed call is retried at most
 * `transient` times (default 2), then the item — and the run — fails. The planner may replan:
 * change the items that are not done yet, and nothing else of the card.
 */
import type { TaskCard } from '../engine/index.js';
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

export type ReplanOutcome = { ok: true } | { ok: false; problems: string[] };

/** Applies a proposed card change: only `plan`, and only its items not done yet. */
/** An item as the planner is shown it (the card's own field names). */
export function planView(item: PlanItem): PlanView {
  return { id: item.id, goal: item.goal, status: item.status, allowed_actions: item.allowedActions, success_evidence: item.successEvidence };
}

export function replan(plan: PlanState, proposed: Record<string, unknown>): ReplanOutcome {
  const problems = Object.keys(proposed)
    .filter((k) => k !== 'plan')
    .map((k) => (FROZEN.includes(k) ? `replanning may not change ${k}` : `a replan may only change plan, not ${k}`));
  const items = proposed.plan;
  if (!Array.isArray(items)) problems.push('a replan must carry plan: the new list of plan items');
  if (problems.length > 0) return { ok: false, problems };
  const next: PlanItem[] = [];
  for (const raw of items as unknown[]) {
    const r = raw as Partial<RawItem>;
    if (typeof r?.id !== 'string' || typeof r.goal !== 'string') return { ok: false, problems: ['each plan item needs an id and a goal'] };
    const done = plan.items.find((i) => i.id === r.id && i.status === 'done');
    next.push(done ?? toItem({ allowed_actions: [], success_evidence: [], status: 'pending', ...r } as RawItem));
  }
  const dropped = plan.items.filter((i) => i.status === 'done' && !next.includes(i));
  if (dropped.length > 0) return { ok: false, problems: [`a replan may not drop done items (${dropped.map((i) => i.id).join(', ')})`] };
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
