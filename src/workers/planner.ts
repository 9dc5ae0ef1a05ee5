/**
 * The planner interface: the loop's decide stage. A planner proposes; it never executes,
 * never decides completion (acceptance does), and never sees more than the loop gives it.
 */
import type { TraceParent } from './tracing.js';

/** What one earlier step looked like, summarised for the planner. */
export interface StepSummary {
  seq: number;
  kind: 'observe' | 'decide' | 'action';
  status: string;
  tool: string | null;
  args: unknown;
  /** A short text of the result (already capped by the loop). */
  result: string | null;
  error: string | null;
}

/** What the loop observed before this decision. */
export interface Observation {
  tool: string | null;
  ok: boolean;
  /** The observe tool's result (JSON), or null when the card has no observe tool. */
  data: unknown;
  error?: string;
  /** A PNG screenshot (base64) when the observation carries one; sent as an image part. */
  imagePng?: string;
}

/** One plan item as the planner sees it. */
export interface PlanView {
  id: string;
  goal: string;
  status: string;
  allowed_actions: string[];
  success_evidence: string[];
}

export interface AllowedTool {
  name: string;
  description: string;
  kind: 'read' | 'write';
  /** JSON Schema of the arguments. */
  parameters: Record<string, unknown>;
}

export interface DecideInput {
  goal: string;
  steps: StepSummary[];
  observation: Observation;
  allowedTools: AllowedTool[];
  /** Refusals of the gate since the last decision, so the planner can change course. */
  rejections: Array<{ tool: string; reason: string }>;
  /** The card's plan as it stands, when it has one: the planner may propose a new one (replan). */
  plan?: PlanView[];
  signal: AbortSignal;
  /** The decide step's trace context: a planner that calls a model starts its span under it (tracing.ts). */
  trace?: TraceParent;
}

export type Decision =
  | { action: 'tool'; tool: string; args: Record<string, unknown>; reason: string }
  | { action: 'done'; reason: string }
  /** Propose a new plan (only `card.plan` may change; anything else is refused). */
  | { action: 'replan'; card: Record<string, unknown>; reason: string }
  | { action: 'fail'; reason: string };

export interface PlannerUsage {
  promptTokens: number;
  completionTokens: number;
  /** In the currency unit of the configured price; 0 when no price is configured. */
  cost: number;
}

export interface DecideResult {
  decision: Decision;
  usage?: PlannerUsage;
}

/**
 * A token count as the stores keep it: whole (rounded up), from 0 to 2^53 - 1, and 0 for what
 * is not a number. A planner's usage is whatever a model server said: a fraction was stored on
 * SQLite and refused by PostgreSQL at every attempt of the run.
 */
export function tokenCount(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.min(Math.ceil(v), Number.MAX_SAFE_INTEGER) : 0;
}

export interface Planner {
  readonly name: string;
  /** Rejects with a PlannerError for malformed output or a failed call (a counted failure). */
  decide(input: DecideInput): Promise<DecideResult>;
}

/** A planner failure: counted toward consecutive failures; never crashes the loop. */
export class PlannerError extends Error {
  readonly kind: 'malformed' | 'call_failed' | 'timeout' | 'aborted' | 'exhausted';
  constructor(kind: PlannerError['kind'], message: string) {
    super(message);
    this.name = 'PlannerError';
    this.kind = kind;
  }
}
