/**
 * Task cards (DESIGN §9, seed 003): the structured input of a run. Parsed by zod at the
 * edge; `checkCard` lists every problem at once so an author can fix a card in one pass.
 * Checks that need the tool registry (is a tool a write tool? which scope key covers it?)
 * live with the loop (src/workers/card-check.ts).
 */
import { z } from 'zod/v4';
import { parseDuration } from './durations.js';

/** The most reads a card's final_state may list. */
export const FINAL_STATE_READS = 100;
/** The most items a card's plan (or a replan) may have. */
export const PLAN_ITEMS = 100;
/** The most checks, and manual items, a card's acceptance may list (each is repeated in the run's envelope). */
export const ACCEPTANCE_CHECKS = 100;

const toolName = z.string().regex(/^[a-z][a-z0-9_]{0,63}$/, 'a tool name (lowercase letters, digits, _)');
const args = z.record(z.string(), z.unknown());
const call = z.strictObject({ tool: toolName, args: args.default({}) });
const duration = z.string().refine((s) => {
  try {
    parseDuration(s);
    return true;
  } catch {
    return false;
  }
}, 'a duration such as 30s, 10m, 2h, of at most 100 years');

/**
 * One decision of a card's script (the scripted planner's, in order). Written out rather
 * than inferred: the declaration of an inferred discriminated union names zod's generics,
 * whose arity differs between zod 3.25's `zod/v4` and zod 4 (a user's tsc would fail).
 */
export type CardDecision =
  | { action: 'tool'; tool: string; args: Record<string, unknown>; reason?: string | undefined }
  | { action: 'done'; reason?: string | undefined }
  | { action: 'fail'; reason?: string | undefined }
  | { action: 'replan'; card: Record<string, unknown>; reason?: string | undefined };
type CardDecisionInput =
  | { action: 'tool'; tool: string; args?: Record<string, unknown> | undefined; reason?: string | undefined }
  | Exclude<CardDecision, { action: 'tool' }>;

export const decisionSchema: z.ZodType<CardDecision, CardDecisionInput> = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('tool'), tool: toolName, args: args.default({}), reason: z.string().optional() }),
  z.strictObject({ action: z.literal('done'), reason: z.string().optional() }),
  z.strictObject({ action: z.literal('fail'), reason: z.string().optional() }),
  z.strictObject({ action: z.literal('replan'), card: args, reason: z.string().optional() }),
]);

const check = z.union([
  z.strictObject({ id: z.string().min(1), path: z.string().min(1), equals: z.unknown() }),
  z.strictObject({ id: z.string().min(1), path: z.string().min(1), in: z.array(z.unknown()).min(1) }),
  z.strictObject({ id: z.string().min(1), path: z.string().min(1), exists: z.boolean() }),
  z.strictObject({ id: z.string().min(1), tools_subset: z.literal(true) }),
  z.strictObject({ id: z.string().min(1), command: z.array(z.string()).min(1), timeout: duration.optional() }),
]);

const planItem = z.strictObject({
  id: z.string().min(1),
  goal: z.string().min(1),
  allowed_actions: z.array(toolName).default([]),
  success_evidence: z.array(toolName).default([]),
  failure_policy: z.strictObject({ transient: z.int().min(0).max(2).default(2), permanent: z.literal('failed').default('failed') }).optional(),
  status: z.enum(['pending', 'in_progress', 'done', 'failed', 'blocked']).default('pending'),
});

export const cardSchema = z.strictObject({
  goal: z.string(),
  planner: z.enum(['scripted', 'llm']).default('scripted'),
  /** The model for the llm planner (else TASKLOOP_MODEL). */
  model: z.string().optional(),
  allowed_tools: z.array(toolName),
  observe: call.optional(),
  /** Object-level authorisation: scope key (e.g. write_ticket_ids) → the ids a write may target. */
  scope: z.record(z.string(), z.array(z.string())).default({}),
  budget: z
    .strictObject({
      max_steps: z.int().min(1).max(10_000).optional(),
      max_write_calls: z.int().min(0).max(10_000).optional(),
      max_pending: z.int().min(0).max(100).optional(),
      max_failures: z.int().min(1).max(100).optional(),
      deadline: duration.optional(),
      max_tokens: z.int().min(1).optional(),
      max_cost: z.number().positive().optional(),
    })
    .default({}),
  approval: z
    .strictObject({
      tools: z.array(toolName).default([]),
      expires_in: duration.optional(),
      on_expiry: z.enum(['degraded', 'failed']).default('failed'),
      /**
       * The acceptance checks a call skipped on expiry would have satisfied: a run ends
       * `degraded` only when every check it failed is one of these; else it fails.
       */
      covers: z.array(z.string().min(1)).default([]),
    })
    .optional(),
  /**
   * At most FINAL_STATE_READS: acceptance makes them all, one after another, at the run's end
   * (an agent's card listed 5,000, session 33's review).
   */
  final_state: z
    .record(z.string(), call)
    .refine((reads) => Object.keys(reads).length <= FINAL_STATE_READS, `at most ${FINAL_STATE_READS} reads`)
    .default({}),
  acceptance: z
    .strictObject({ checks: z.array(check).max(ACCEPTANCE_CHECKS, `at most ${ACCEPTANCE_CHECKS} checks`).default([]), manual: z.array(z.string()).max(ACCEPTANCE_CHECKS, `at most ${ACCEPTANCE_CHECKS} items`).default([]) })
    .optional(),
  plan: z.array(planItem).max(PLAN_ITEMS, `at most ${PLAN_ITEMS} items`).optional(),
  script: z.array(decisionSchema).optional(),
  /** Commands `launch_app` may start (desktop cards). */
  launch_allowlist: z.array(z.array(z.string()).min(1)).optional(),
  /** Tuning of the no-progress detectors. */
  loop: z
    .strictObject({
      repeat_limit: z.int().min(2).max(100).default(3),
      idle_rounds: z.int().min(2).max(1000).default(6),
    })
    .default({ repeat_limit: 3, idle_rounds: 6 }),
});

export type TaskCard = z.output<typeof cardSchema>;
export type AcceptanceCheck = z.output<typeof check>;

/** `card` is set on a refusal too when the card parsed, so further checks can add their problems. */
export type CardCheck = { ok: true; card: TaskCard } | { ok: false; problems: string[]; card?: TaskCard };

/** Parses a card and checks the rules of seed 003 §2.1; lists every problem found. */
export function checkCard(raw: unknown): CardCheck {
  const parsed = cardSchema.safeParse(raw);
  if (!parsed.success) {
    return { ok: false, problems: parsed.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : 'card'}: ${i.message}`) };
  }
  const card = parsed.data;
  const problems: string[] = [];
  if (card.goal.trim() === '') problems.push('goal: must not be empty');
  if (card.allowed_tools.length === 0) problems.push('allowed_tools: must list at least one tool');
  if (card.acceptance === undefined || (card.acceptance.checks.length === 0 && card.acceptance.manual.length === 0)) {
    problems.push('acceptance: must have at least one check or manual item');
  }
  if (card.budget.max_steps === undefined && card.budget.max_write_calls === undefined) {
    problems.push('budget: must bound the run with max_steps or max_write_calls');
  }
  if (card.planner === 'scripted' && (card.script === undefined || card.script.length === 0)) {
    problems.push('script: a scripted card needs its decisions');
  }
  return problems.length === 0 ? { ok: true, card } : { ok: false, problems, card };
}
