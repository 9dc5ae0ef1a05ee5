/** Row shapes of runs and steps (the same columns in both stores) and their mapping to engine types. */
import type { Budget, Run, Step, Usage } from './runs.js';

export interface RunRow {
  id: number;
  task_id: number;
  phase: Run['phase'];
  stop_reason: string | null;
  budget: string;
  usage: string;
  checkpoint_version: number;
  restarts: number;
  started_at: number;
  finished_at: number | null;
  envelope: string | null;
}

export interface StepRow {
  id: number;
  run_id: number;
  seq: number;
  kind: Step['kind'];
  status: Step['status'];
  tool: string | null;
  args: string | null;
  result: string | null;
  error: string | null;
  duration_ms: number | null;
  tokens: number;
  idempotency_key: string | null;
  started_at: number;
  finished_at: number | null;
}

/** The columns of RunRow in order, for statements in raw mode (`runRowOf`). */
export const RUN_COLUMNS = 'id, task_id, phase, stop_reason, budget, usage, checkpoint_version, restarts, started_at, finished_at, envelope';

/** A RunRow from a raw row of RUN_COLUMNS. */
export function runRowOf(a: unknown[]): RunRow {
  return {
    id: a[0] as number,
    task_id: a[1] as number,
    phase: a[2] as Run['phase'],
    stop_reason: a[3] as string | null,
    budget: a[4] as string,
    usage: a[5] as string,
    checkpoint_version: a[6] as number,
    restarts: a[7] as number,
    started_at: a[8] as number,
    finished_at: a[9] as number | null,
    envelope: a[10] as string | null,
  };
}

const json = (text: string | null): unknown => (text === null ? null : JSON.parse(text));

export function toRun(row: RunRow): Run {
  return {
    id: row.id,
    taskId: row.task_id,
    phase: row.phase,
    stopReason: row.stop_reason,
    budget: JSON.parse(row.budget) as Budget,
    usage: JSON.parse(row.usage) as Usage,
    checkpointVersion: row.checkpoint_version,
    restarts: row.restarts,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    envelope: json(row.envelope) as Run['envelope'],
  };
}

export function toStep(row: StepRow): Step {
  return {
    id: row.id,
    runId: row.run_id,
    seq: row.seq,
    kind: row.kind,
    status: row.status,
    tool: row.tool,
    args: json(row.args),
    result: json(row.result),
    error: row.error,
    durationMs: row.duration_ms,
    tokens: row.tokens,
    idempotencyKey: row.idempotency_key,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
  };
}

export const ZERO_USAGE: Usage = { steps: 0, writeCalls: 0, pending: 0, tokens: 0, cost: 0, consecutiveFailures: 0 };
