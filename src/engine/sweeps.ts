/**
 * The stale sweep's passes, the same on both stores. The sweep is how the engine recovers
 * from every dead worker, so no one task may stop it, and no pass may hold the write lock
 * for as long as some agent's claims make it:
 *
 * - **Batches.** One transaction reclaims at most SWEEP_BATCH tasks, in id order; the next
 *   begins after the last one it read. A sweep of 100,000 expired claims (an agent that
 *   claimed them all and stopped) was one transaction, holding SQLite's write lock for
 *   seconds while every other writer waited.
 * - **One task cannot stop the others.** A reclaim that throws anything but a store fault
 *   (the state machine refusing a damaged row, a bug) is thrown as a SweepTaskError naming
 *   its task; its batch rolls back and runs again without it, and the task is reported in
 *   `skipped`, with the reason, on every sweep until someone mends it. Before, the one
 *   transaction threw for every task: a chain of dependents deep enough to overflow the
 *   stack (fixed in moves.ts) kept every stale task in the database claimed, for good.
 *   A store fault (a full disk, corruption, a lost connection) still fails the sweep.
 */
import { appendAll } from './append-all.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { EngineError } from './errors.js';
import type { WriteOutcome } from './store.js';
import type { SweepResult, TaskEvent } from './types.js';

/** The most tasks one of the sweep's transactions reclaims. */
export const SWEEP_BATCH = 500;
/** The pause between two batches of one sweep. */
const BATCH_GAP_MS = 5;
/** A sweep gives up after this many tasks it could not reclaim (each costs a transaction). */
const MAX_SKIPPED = 100;

/** What one batch did: the sweep's result for its tasks, and the last task id it read. */
export interface SweepBatch extends SweepResult {
  /** How many expired tasks the batch read (at most SWEEP_BATCH). */
  read: number;
  /** The highest id it read; the next batch reads after it. */
  last: number;
}

/** A reclaim that failed for a reason of its task's own, not the store's. */
export class SweepTaskError extends Error {
  constructor(
    readonly taskId: number,
    override readonly cause: unknown,
  ) {
    super(`task ${taskId}: ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

/**
 * Whether a reclaim's error is its task's own: the engine's refusal (not a STORE_ fault), or
 * an error with no code (a bug, a damaged value). Anything else with a code is the store's
 * (SQLite's and PostgreSQL's errors, a lost connection) and fails the sweep as before.
 */
export function isTasksOwn(err: unknown): boolean {
  if (err instanceof EngineError) return !err.code.startsWith('STORE_');
  return err instanceof Error && typeof (err as { code?: unknown }).code !== 'string';
}

/** Runs one task's reclaim; an error of the task's own is thrown as a SweepTaskError naming it. */
export function asTasksOwn<T>(taskId: number, fn: () => T): T {
  const named = (err: unknown) => (isTasksOwn(err) ? new SweepTaskError(taskId, err) : err);
  let out: T;
  try {
    out = fn();
  } catch (err) {
    throw named(err);
  }
  return out instanceof Promise ? (out.catch((err: unknown) => Promise.reject(named(err))) as T) : out;
}

/** The one-line reason a task was skipped: its error's code (or name) and message. */
function reasonOf(err: unknown): { code: string; message: string } {
  if (err instanceof EngineError) return { code: err.code, message: err.message };
  if (err instanceof Error) return { code: err.name, message: err.message.split('\n')[0]! };
  return { code: 'Error', message: String(err) };
}

/** The states that hold a lease, swept one after the other. */
export const LEASED_STATES = ['claimed', 'in_progress'] as const;

/**
 * Where a batch reads: expired tasks in `state` with ids above `after`, none of the skipped.
 * Each state on its own, in id order, so a batch reads its index range from the cursor on and
 * stops at SWEEP_BATCH (both states in one id order made SQLite read and sort every leased
 * task past the cursor, at each batch). `mark`: the pass's first batch also marks the leases
 * seen expired now (the sweep's first phase, one statement for all).
 */
export interface SweepCursor {
  state: (typeof LEASED_STATES)[number];
  after: number;
  mark: boolean;
}

/** Runs `batch`, one transaction each, over both leased states until each is read through, and adds up what they did. */
export async function sweepInBatches(batch: (at: SweepCursor, skip: readonly number[]) => Promise<WriteOutcome<SweepBatch>>): Promise<WriteOutcome<SweepResult>> {
  const value: SweepResult = { marked: 0, requeued: [], failed: [] };
  const events: TaskEvent[] = [];
  const skip: number[] = [];
  for (const state of LEASED_STATES) {
    let after = 0;
    for (;;) {
      let out: WriteOutcome<SweepBatch>;
      try {
        out = await batch({ state, after, mark: state === LEASED_STATES[0] && after === 0 }, skip);
      } catch (err) {
        if (!(err instanceof SweepTaskError) || skip.length >= MAX_SKIPPED) throw err instanceof SweepTaskError ? err.cause : err;
        skip.push(err.taskId);
        (value.skipped ??= []).push({ taskId: err.taskId, ...reasonOf(err.cause) });
        continue;
      }
      value.marked += out.value.marked;
      value.requeued.push(...out.value.requeued);
      value.failed.push(...out.value.failed);
      appendAll(events, out.events);
      if (out.value.read < SWEEP_BATCH) break;
      after = out.value.last;
      // A breath between batches: a writer of another process waiting for the lock polls it
      // (busy.ts), and one batch after another would win it again every time.
      await sleep(BATCH_GAP_MS);
    }
  }
  return { value, events };
}

/** The log line for a sweep that did something (a daemon's, `taskloop serve`'s), or undefined. */
export function describeSweep(swept: SweepResult): string | undefined {
  const skipped = swept.skipped ?? [];
  if (swept.requeued.length + swept.failed.length + skipped.length === 0) return undefined;
  const line = `sweep: requeued ${swept.requeued.join(', ') || '-'}, failed ${swept.failed.join(', ') || '-'}`;
  if (skipped.length === 0) return line;
  return `${line}; could not reclaim ${skipped.map((s) => `${s.taskId} (${s.code}: ${s.message})`).join(', ')}`;
}
