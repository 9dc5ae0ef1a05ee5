/**
 * Layered budgets (seed 004): the limits are fixed on the run when it starts and the
 * usage is carried across pause, approval waits, crashes and resume; neither ever resets.
 */
import { type Budget, type TaskCard, type Usage, parseDuration } from '../engine/index.js';

export const DEFAULT_MAX_STEPS = 20;
export const DEFAULT_MAX_FAILURES = 3;

export function budgetFromCard(card: TaskCard, startedAt: number): Budget {
  const b = card.budget;
  return {
    maxSteps: b.max_steps ?? DEFAULT_MAX_STEPS,
    maxFailures: b.max_failures ?? DEFAULT_MAX_FAILURES,
    maxWriteCalls: b.max_write_calls ?? null,
    maxPending: b.max_pending ?? null,
    deadlineAt: b.deadline === undefined ? null : startedAt + parseDuration(b.deadline),
    maxTokens: b.max_tokens ?? null,
    maxCost: b.max_cost ?? null,
  };
}

/**
 * The budget of a new run of a task with this (unchecked) card: the card's own limits where
 * they have the right type, else the defaults. No schema parse: the claimer calls it for
 * every claim (a card is checked at creation and again by the run, which rejects an invalid
 * one before any step, whatever budget it got).
 */
export function budgetOfTask(rawCard: unknown, startedAt: number): Budget {
  const raw = (rawCard as { budget?: unknown } | null)?.budget;
  const b = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const count = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : undefined);
  let deadline: string | undefined;
  if (typeof b.deadline === 'string') {
    try {
      parseDuration(b.deadline);
      deadline = b.deadline;
    } catch {
      deadline = undefined;
    }
  }
  return budgetFromCard({
    budget: {
      max_steps: count(b.max_steps), max_failures: count(b.max_failures), max_write_calls: count(b.max_write_calls),
      max_pending: count(b.max_pending), max_tokens: count(b.max_tokens), max_cost: count(b.max_cost), deadline,
    },
  } as TaskCard, startedAt);
}

/** The budget with its deadline at most `maxRunMs` after `startedAt` (a daemon's cap on every run it starts). */
export function capRun(budget: Budget, startedAt: number, maxRunMs: number | undefined): Budget {
  if (maxRunMs === undefined) return budget;
  const cap = startedAt + maxRunMs;
  return budget.deadlineAt !== null && budget.deadlineAt <= cap ? budget : { ...budget, deadlineAt: cap };
}

/** The stop reason of the first exhausted limit, or null while the run may go on. */
export function exhausted(budget: Budget, usage: Usage, now: number): string | null {
  if (usage.steps >= budget.maxSteps) return 'max_steps';
  if (budget.deadlineAt !== null && now >= budget.deadlineAt) return 'deadline';
  if (budget.maxTokens !== null && usage.tokens >= budget.maxTokens) return 'max_tokens';
  if (budget.maxCost !== null && usage.cost >= budget.maxCost) return 'max_cost';
  return null;
}

/** Whether one more write call fits the budget. */
export function writeAllowed(budget: Budget, usage: Usage): boolean {
  return budget.maxWriteCalls === null || usage.writeCalls < budget.maxWriteCalls;
}
