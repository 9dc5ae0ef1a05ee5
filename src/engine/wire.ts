/**
 * External JSON (DESIGN §8): what users and agents read is snake_case with ISO times.
 * Every surface (CLI --json, HTTP, tools, MCP) maps through these functions.
 */
import type { Approval } from './approvals.js';
import type { Budget, Run, Step } from './runs.js';
import type { ClaimedTask, Task, TaskEvent } from './types.js';
import type { StoreInfo } from './store.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export interface WireTask {
  id: number;
  title: string;
  state: string;
  priority: number;
  creator: string;
  assignee: string | null;
  attempts: number;
  max_attempts: number;
  depends_on: number[];
  queue: string;
  for_agent: string | null;
  requires: string[];
  idempotency_key: string | null;
  run_after: string | null;
  created_at: string | null;
  updated_at: string | null;
  lease_expires_at: string | null;
  card: Record<string, unknown>;
  result: unknown;
  claim_token?: string;
}

export interface WireEvent {
  id: number;
  task_id: number | null;
  type: string;
  actor: string;
  actor_role: string;
  data: Record<string, unknown>;
  created_at: string | null;
}

export function toWireTask(task: Task | ClaimedTask): WireTask {
  const wire: WireTask = {
    id: task.id,
    title: task.title,
    state: task.state,
    priority: task.priority,
    creator: task.creator,
    assignee: task.assignee,
    attempts: task.attempts,
    max_attempts: task.maxAttempts,
    depends_on: task.dependsOn,
    queue: task.queue,
    for_agent: task.forAgent,
    requires: task.requires,
    idempotency_key: task.idempotencyKey,
    run_after: iso(task.runAfter),
    created_at: iso(task.createdAt),
    updated_at: iso(task.updatedAt),
    lease_expires_at: iso(task.leaseExpiresAt),
    card: task.card,
    result: task.result,
  };
  if ('claimToken' in task) wire.claim_token = task.claimToken;
  return wire;
}

export function toWireEvent(event: TaskEvent): WireEvent {
  return {
    id: event.id,
    task_id: event.taskId,
    type: event.type,
    actor: event.actor,
    actor_role: event.actorRole,
    data: event.data,
    created_at: iso(event.createdAt),
  };
}

export function toWireStoreInfo(i: StoreInfo): Record<string, unknown> {
  const c = i.capabilities;
  return {
    kind: i.kind,
    location: i.location,
    version: i.version,
    schema_version: i.schemaVersion,
    known_schema_version: i.knownSchemaVersion,
    readonly: i.readonly,
    capabilities: { multiple_hosts: c.multipleHosts, pid_liveness: c.pidLiveness, push_wakeups: c.pushWakeups, skip_locked: c.skipLocked },
  };
}

export function toWireBudget(b: Budget): Record<string, unknown> {
  return {
    max_steps: b.maxSteps,
    max_failures: b.maxFailures,
    max_write_calls: b.maxWriteCalls,
    max_pending: b.maxPending,
    deadline: iso(b.deadlineAt),
    max_tokens: b.maxTokens,
    max_cost: b.maxCost,
  };
}

export function toWireRun(run: Run): Record<string, unknown> {
  const u = run.usage;
  return {
    id: run.id,
    task_id: run.taskId,
    phase: run.phase,
    stop_reason: run.stopReason,
    budget: toWireBudget(run.budget),
    usage: { steps: u.steps, write_calls: u.writeCalls, pending: u.pending, tokens: u.tokens, cost: u.cost, consecutive_failures: u.consecutiveFailures },
    checkpoint_version: run.checkpointVersion,
    restarts: run.restarts,
    started_at: iso(run.startedAt),
    finished_at: iso(run.finishedAt),
    envelope: run.envelope,
  };
}

export function toWireApproval(a: Approval): Record<string, unknown> {
  return {
    id: a.id,
    task_id: a.taskId,
    run_id: a.runId,
    tool: a.tool,
    args: a.args,
    fingerprint: a.fingerprint,
    state: a.state,
    reason: a.reason,
    created_at: iso(a.createdAt),
    expires_at: iso(a.expiresAt),
    decided_at: iso(a.decidedAt),
    decided_by: a.decidedBy,
    decided_by_role: a.decidedByRole,
  };
}

export function toWireStep(s: Step): Record<string, unknown> {
  return {
    id: s.id,
    run_id: s.runId,
    seq: s.seq,
    kind: s.kind,
    status: s.status,
    tool: s.tool,
    args: s.args,
    result: s.result,
    error: s.error,
    duration_ms: s.durationMs,
    tokens: s.tokens,
    idempotency_key: s.idempotencyKey,
    started_at: iso(s.startedAt),
    finished_at: iso(s.finishedAt),
  };
}
