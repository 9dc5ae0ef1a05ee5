/**
 * A claim's rules that hold on every store: whether a named task may be claimed by this
 * claimer now, and what taking it writes (the row's lease columns and the claim's events).
 * The adapters only find the row and write what this returns.
 */
import { randomUUID } from 'node:crypto';
import { asAgent } from './actors.js';
import { assertReadable } from './authority.js';
import { DEFAULT_LEASE_MS } from './creation.js';
import { EngineError } from './errors.js';
import { checkClaim } from './states.js';
import { type TaskRow, readSubject } from './task-rows.js';
import type { ClaimInput, TaskEvent } from './types.js';

/**
 * Which claimers a commit wakes (a NOTIFY on PostgreSQL, a wake file on SQLite), if any: only
 * a commit that may have made a task claimable (created, or moved back to pending) wakes
 * them, and a dependency's completion that freed its dependents (`forced`: the store's own
 * write knows whether it freed one). A claim, a step or a completion with no dependents wakes
 * nobody: on PostgreSQL NOTIFY serializes commits server-wide, on SQLite each wake costs a
 * claimer a look. Those it wakes: the claimers of every queue (`all`), or only of `queues`.
 * A create names its task's queue in its event, so it wakes that queue's claimers alone (an
 * idle worker of another queue no longer looks after every create anywhere); a move back to
 * pending and a freed dependent (`forced`: the store's own write knew it freed one) do not,
 * and wake every queue, as does a batch across more than MAX_QUEUE_WAKES queues.
 */
export type WorkWake = { all: true } | { all: false; queues: ReadonlySet<string> };

export const MAX_QUEUE_WAKES = 8;

export function workWakeOf(events: readonly TaskEvent[], forced = false): WorkWake | undefined {
  if (forced) return { all: true };
  let queues: Set<string> | undefined;
  for (const e of events) {
    const data = e.data as { to?: unknown; queue?: unknown };
    if (data.to !== 'pending') continue;
    if (e.type !== 'task.created' || typeof data.queue !== 'string') return { all: true };
    (queues ??= new Set()).add(data.queue);
  }
  if (queues === undefined) return undefined;
  return queues.size > MAX_QUEUE_WAKES ? { all: true } : { all: false, queues };
}

/** `work` and the claimers of `queues` too (a commit that made their tasks claimable with no event to say so). */
export function withQueues(work: WorkWake | undefined, queues: ReadonlySet<string> | undefined): WorkWake | undefined {
  if (queues === undefined || work?.all === true) return work;
  const all = new Set([...(work?.queues ?? []), ...queues]);
  return all.size > MAX_QUEUE_WAKES ? { all: true } : { all: false, queues: all };
}

/** The buckets of `queues` (each once). */
export function wakeBuckets(queues: ReadonlySet<string>): Set<string> {
  return new Set([...queues].map(wakeBucket));
}

/**
 * The wake-up bucket of a queue (two hex digits, FNV-1a): claimers listen for their queue's
 * bucket (a wake file, a NOTIFY channel), so a bucket's name is bounded and never the
 * queue's own text. Queues that share a bucket wake each other's claimers, for a look each.
 */
export function wakeBucket(queue: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < queue.length; i++) h = Math.imul(h ^ queue.charCodeAt(i), 0x01000193);
  return ((h >>> 0) & 0xff).toString(16).padStart(2, '0');
}

/**
 * How many due tasks one claim releases at most (a task not yet due is `delayed`, out of the
 * claimable parts, until a claim in its queue releases it: SQLite's migration 13, PostgreSQL's
 * version 9). A release writes each task's row and its part's entries (~3 µs a task on SQLite,
 * inside the write lock; ~30 on PostgreSQL): 25,000 reminders falling due at nine o'clock are
 * released by the first claims after it, RELEASE_LIMIT at a time, earliest due first, not all by
 * one (BullMQ promotes its delayed jobs 1,000 a call). Among more than RELEASE_LIMIT due and not
 * yet released (falling due together, or over a while in a queue no one claimed from), the
 * first claims choose from the earliest due.
 */
export const RELEASE_LIMIT = 500;
/**
 * How many times one claim releases RELEASE_LIMIT before it gives up looking (4,000 tasks:
 * 14–16 ms on SQLite, inside the write lock, up to ~65 with a checkpoint; 0.11–0.21 s on
 * PostgreSQL). A claim releases again only while a full release held nothing it may take:
 * behind 500 due tasks reserved for another agent (or waiting on dependencies, or requiring
 * what it lacks) it returned nothing, and its worker slept a second before the next 500
 * (25,000 in front: 50 s). A full release also wakes the queue's claimers, as a create does: a
 * claim that gave up is tried again at once (on SQLite not within the same group commit: one
 * claim there gives up for the rest), and the tasks it released are found by those that may
 * take them. A smaller one wakes no one: every task due is then released, and a claimer finds
 * what it may take at its next look, as it finds any task falling due (waking on every release
 * turned idle workers into a busy loop under a steady stream of tasks falling due for others).
 */
export const RELEASE_ROUNDS = 8;

/** Whether a task that requires `requires` (JSON text or null) may go to a claimer with `capabilities`. */
export function hasCapabilities(requires: string | null, capabilities: readonly string[] | undefined): boolean {
  if (requires === null) return true;
  const have = new Set(capabilities ?? []);
  return (JSON.parse(requires) as string[]).every((c) => have.has(c));
}

/** Refuses a claim of the task named by `input.taskId` that is not claimable by this claimer now. */
export function checkClaimTarget(row: TaskRow | undefined, input: ClaimInput, now: number): TaskRow {
  const id = input.taskId!;
  if (row === undefined) throw new EngineError('TASK_NOT_FOUND', `task ${id} does not exist`, { task_id: id });
  // A task the claimer may not read (held by another, finished, reserved for another agent):
  // one refusal that names neither its state nor whom it is reserved for.
  assertReadable(asAgent(input.agent), readSubject(row));
  if (row.state !== 'pending') {
    throw new EngineError('INVALID_TRANSITION', `task ${id} is ${row.state}; only a pending task can be claimed`, { task_id: id });
  }
  const forOther = row.for_agent !== null && row.for_agent !== input.agent;
  if (forOther || !hasCapabilities(row.requires, input.capabilities)) {
    const need = forOther ? `agent ${row.for_agent}` : `capabilities ${row.requires}`;
    throw new EngineError('FORBIDDEN', `task ${id} is reserved for ${need}; ${input.agent} may not claim it`, { task_id: id });
  }
  if (row.unmet_deps > 0) {
    throw new EngineError('INVALID_TRANSITION', `task ${id} waits for ${row.unmet_deps} unfinished dependencies`, { task_id: id });
  }
  if (row.run_after > now) {
    throw new EngineError('INVALID_TRANSITION', `task ${id} may not run before ${new Date(row.run_after).toISOString()}`, { task_id: id });
  }
  return row;
}

/** The data of a claim's `task.claimed` event. */
export const claimedData = (attempt: number, leaseExpiresAt: number): Record<string, unknown> => ({
  from: 'pending',
  to: 'claimed',
  attempt,
  lease_expires_at: leaseExpiresAt,
});

/** The data of the `task.transitioned` event of a claim that starts its task (`start`). */
export const startedData = (): Record<string, unknown> => ({ from: 'claimed', to: 'in_progress' });

/** What a claim by `input` sets whatever the row held: the state it leaves, the lease and a fresh token. */
export function claimTerms(input: ClaimInput): { state: 'claimed' | 'in_progress'; leaseMs: number; token: string } {
  return { state: input.start === true ? 'in_progress' : 'claimed', leaseMs: input.leaseMs ?? DEFAULT_LEASE_MS, token: randomUUID() };
}

/**
 * Takes the claim on `row` (as read in the claiming transaction): asks the state machine,
 * then sets the lease columns on the row in place and returns the claim's events (ids 0
 * until written) and its fresh token. A store that claims a picked task in one statement
 * (PostgreSQL's claim.ts claimOne) writes the same from `claimTerms`, `claimedData` and
 * `startedData`: a picked task is pending, and an agent may claim any pending task.
 */
export function takeClaim(row: TaskRow, input: ClaimInput, now: number): { token: string; events: TaskEvent[] } {
  const verdict = checkClaim({ id: row.id, state: row.state, creator: row.creator, creatorRole: row.creator_role, assignee: row.assignee }, asAgent(input.agent));
  if (!verdict.ok) throw new EngineError(verdict.code, verdict.message, { task_id: row.id });
  const { state, leaseMs, token } = claimTerms(input);
  row.state = state;
  row.assignee = input.agent;
  row.claim_token = token;
  row.attempts += 1;
  row.lease_ms = leaseMs;
  row.lease_expires_at = now + leaseMs;
  row.stale_since = null;
  row.updated_at = now;
  if (input.workerId !== undefined) row.worker_id = input.workerId;
  const event = (type: string, data: Record<string, unknown>): TaskEvent => ({ id: 0, taskId: row.id, type, actor: input.agent, actorRole: 'agent', data, createdAt: now });
  const events = [event('task.claimed', claimedData(row.attempts, row.lease_expires_at))];
  if (input.start === true) events.push(event('task.transitioned', startedData()));
  return { token, events };
}
