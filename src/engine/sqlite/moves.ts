/**
 * Applying a move: the state machine's check, the row update, its event, and what the move
 * means for dependents. Every move of a task's state after its claim passes here (transitions,
 * sweeps, approvals, controls, releases, run endings, cascades), and `stage` asks
 * `checkMove` for each one, system moves included: a move states.ts refuses throws and,
 * since this always runs inside the caller's transaction, writes nothing.
 */
import { systemActor } from '../actors.js';
import { isTerminal } from '../states.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { markWake } from './wake-files.js';
import { type EventWriter, type TaskRow, TASK_COLUMNS, rowOf } from './rows.js';
import { ABANDONED_READ_ERROR, ABANDONED_WRITE_ERROR, type ActionRow, abandonedRunEnvelope, abandonedSettles, abandonedSideEffects } from '../abandoned-run.js';
import { reclaimSpec, stageMove } from '../task-rows.js';

export type { MoveSpec } from '../task-rows.js';
import type { MoveSpec } from '../task-rows.js';

/**
 * Writes the move and returns the full updated row. `row` must be the task as stored now,
 * i.e. read in this transaction after any earlier write to it (every caller reads it so):
 * the returned row is `row` with the columns the move sets.
 */
export type ApplyMove = (row: TaskRow, spec: MoveSpec, now: number, events: TaskEvent[]) => TaskRow;

/**
 * The moves of one task staged in a transaction and not written yet: what they changed
 * beyond the columns every move writes (ASSIGNEE | WORKER | RESULT) and their events.
 */
export interface StagedMoves {
  changed: number;
  events: TaskEvent[];
  /** events[i].data as JSON when known without JSON.stringify. */
  json: Array<string | undefined>;
  /**
   * The task's last_event_id when the caller read the row in this transaction; otherwise
   * undefined and the event chain is linked to the stored value (see appendChain).
   */
  head?: number;
  /** Whether other tasks depend on this one, when the caller read it with the row. */
  hasDependents?: boolean;
}

/**
 * The parts of a move, for a caller that chains several moves of one task in one
 * transaction (transition's `then`): `stage` checks nothing, queues the move's event and
 * returns the row as it will be; `commit` writes the staged events and the last staged
 * row with one UPDATE, then applies what its state means for dependents. Intermediate
 * states are never visible outside the transaction, so writing only the last one is the
 * same as writing each, and it spares the indexes an entry inserted and deleted again.
 */
export interface MoveParts {
  stage(row: TaskRow, spec: MoveSpec, now: number, events: TaskEvent[], staged: StagedMoves): TaskRow;
  commit(row: TaskRow, now: number, events: TaskEvent[], staged: StagedMoves): TaskRow;
}

export const noMovesStaged = (): StagedMoves => ({ changed: 0, events: [], json: [] });

const parts = new WeakMap<ApplyMove, MoveParts>();

/** The parts behind an ApplyMove made by `prepareMoves`. */
export function moveParts(apply: ApplyMove): MoveParts | undefined {
  return parts.get(apply);
}


// What a staged row changed since the stored one, beyond the columns every move writes.
const SYSTEM = systemActor('system');

const ASSIGNEE = 1;
const WORKER = 2;
const RESULT = 4;

export function prepareMoves(db: Db, writer: EventWriter): ApplyMove {
  // One UPDATE per combination of indexed columns that changed. SQLite rewrites an index entry
  // whenever one of its columns is assigned, even to the same value: a move that keeps the
  // assignee (all but a return to pending) must not assign it, or tasks_by_assignee costs a
  // page write per move. The new row is built in JS (movedRow), not read back.
  const updates = [0, 1, 2, 3].map((mask) =>
    db.prepare(
      `UPDATE tasks SET state = ?, claim_token = ?, lease_expires_at = ?, stale_since = NULL, updated_at = ?, last_event_id = ?,
         result = CASE WHEN ? THEN ? ELSE result END${mask & ASSIGNEE ? ', assignee = ?' : ''}${mask & WORKER ? ', worker_id = ?' : ''}
       WHERE id = ?`,
    ),
  );
  // Most tasks have no dependents: a probe of task_deps_reverse is far cheaper than the
  // release UPDATE, which opens write cursors on tasks and every index even when it matches nothing.
  const hasDependents = db.prepare<[number], number>('SELECT 1 FROM task_deps WHERE depends_on = ? LIMIT 1').pluck(true);
  const release = db.prepare('UPDATE tasks SET unmet_deps = unmet_deps - 1 WHERE id IN (SELECT task_id FROM task_deps WHERE depends_on = ?)');
  // Ids only: an agent can hang any number of tasks on one, and their rows are read one at a
  // time as each is cancelled (a statement still stepping keeps the connection from writing).
  const dependents = db
    .prepare<[number], number>(
      `SELECT t.id FROM task_deps d JOIN tasks t ON t.id = d.task_id
       WHERE d.depends_on = ? AND t.state NOT IN ('completed', 'failed', 'cancelled') ORDER BY t.id`,
    )
    .pluck(true);
  const rowById = db.prepare<[number], unknown[]>(`SELECT ${TASK_COLUMNS} FROM tasks WHERE id = ?`).raw(true);

  const stage: MoveParts['stage'] = (row, spec, now, events, staged) => {
    const { next, event } = stageMove(row, spec, now);
    // A given result, or one a move back to pending clears (movedRow).
    const newResult = spec.result !== undefined || next.result !== row.result;
    events.push(event);
    staged.events.push(event);
    // States are plain identifiers: for the bare {from, to} this is what JSON.stringify writes.
    staged.json.push(spec.data === undefined && spec.reason === undefined ? `{"from":"${row.state}","to":"${spec.to}"}` : undefined);
    staged.changed |=
      (next.assignee !== row.assignee ? ASSIGNEE : 0) | (next.worker_id !== row.worker_id ? WORKER : 0) | (newResult ? RESULT : 0);
    return next;
  };

  const commit: MoveParts['commit'] = (row, now, events, staged) => {
    const mask = staged.changed;
    // The events first: the first one links to the task's last_event_id as stored.
    if (staged.events.length > 0) row.last_event_id = writer.appendChain(row.id, staged.events, staged.json, staged.head);
    const params: unknown[] = [row.state, row.claim_token, row.lease_expires_at, now, row.last_event_id, mask & RESULT ? 1 : 0, mask & RESULT ? row.result : null];
    if (mask & ASSIGNEE) params.push(row.assignee);
    if (mask & WORKER) params.push(row.worker_id);
    params.push(row.id);
    updates[mask & (ASSIGNEE | WORKER)]!.run(...params);
    if (row.state === 'completed') {
      if ((staged.hasDependents ?? hasDependents.get(row.id) !== undefined) && release.run(row.id).changes > 0) markWake(db, 'work');
    } else if (isTerminal(row.state)) {
      closeOpenRun(row, now, events);
      cancelDependents(row, now, events);
    }
    return row;
  };

  /**
   * A dependency that can never complete: its dependents can never run, so they are cancelled
   * now, and theirs in turn, rather than left pending forever. Breadth first from a work list,
   * not by recursion: any agent can build a chain of tasks each depending on the one before
   * (20,000 in ~0.6 s), and cancelling its root recursed once per link and overflowed the
   * stack, so the root's cancel, its worker's failure and the sweep's last reclaim all threw
   * and rolled back, every time.
   */
  let cascade: Array<{ id: number; state: string }> | undefined;
  function cancelDependents(row: TaskRow, now: number, events: TaskEvent[]): void {
    if (cascade !== undefined) {
      cascade.push({ id: row.id, state: row.state }); // the cascade already running takes it
      return;
    }
    cascade = [{ id: row.id, state: row.state }];
    try {
      for (let i = 0; i < cascade.length; i++) {
        const { id, state } = cascade[i]!;
        for (const dep of dependents.all(id)) {
          apply(rowOf(rowById.get(dep)!), { to: 'cancelled', actor: SYSTEM, reason: `dependency ${id} ended ${state}` }, now, events);
        }
      }
    } finally {
      cascade = undefined;
    }
  }

  /**
   * A task that fails or is cancelled outside its run (an operator's cancel, the sweep's last
   * reclaim) must not leave that run open: it is ended here with an envelope that says so,
   * and a stop is recorded so a loop still running aborts its tool call at once (its next
   * fenced write would be refused anyway).
   */
  const openRun = db.prepare<[number], { id: number; usage: string; checkpoint_version: number }>(
    'SELECT id, usage, checkpoint_version FROM runs WHERE task_id = ? AND finished_at IS NULL',
  );
  const endRun = db.prepare('UPDATE runs SET phase = ?, stop_reason = ?, envelope = ?, finished_at = ? WHERE id = ?');
  const actionsOf = db.prepare<[number], ActionRow>("SELECT seq, tool, args, status, result FROM steps WHERE run_id = ? AND kind = 'action' ORDER BY seq");
  // The run's intents (abandoned-run.ts): found through task_events_by_task (run events are not chained).
  const intentsOf = db.prepare<[number, number], { seq: number }>(
    "SELECT json_extract(data, '$.seq') AS seq FROM task_events WHERE task_id = ? AND prev_id IS NULL AND type = 'run.step_started' AND json_extract(data, '$.run_id') = ? AND json_extract(data, '$.intent') = 1",
  );
  const settleStarted = db.prepare("UPDATE steps SET status = ?, error = ?, finished_at = ? WHERE run_id = ? AND seq = ? AND status = 'started'");
  const stopControl = db.prepare(
    `INSERT INTO controls (task_id, state, reason, updated_at) VALUES (?, 'stopped', ?, ?)
     ON CONFLICT (task_id) DO UPDATE SET state = 'stopped', reason = excluded.reason, updated_at = excluded.updated_at`,
  );
  function closeOpenRun(row: TaskRow, now: number, events: TaskEvent[]): void {
    const run = openRun.get(row.id);
    if (run === undefined) return;
    const steps = (JSON.parse(run.usage) as { steps?: number }).steps ?? 0;
    const actions = actionsOf.all(run.id);
    const intents = new Set(intentsOf.all(row.id, run.id).map((i) => i.seq));
    const effects = abandonedSideEffects(actions, intents);
    const settles = abandonedSettles(actions, intents);
    for (const seq of settles.unknown) settleStarted.run('unknown', ABANDONED_WRITE_ERROR, now, run.id, seq);
    for (const seq of settles.abandoned) settleStarted.run('abandoned', ABANDONED_READ_ERROR, now, run.id, seq);
    const envelope = abandonedRunEnvelope(run.id, row, steps, run.checkpoint_version, effects);
    endRun.run(envelope.phase, envelope.stop_reason, JSON.stringify(envelope), now, run.id);
    stopControl.run(row.id, envelope.stop_reason, now);
    markWake(db, 'controls'); // a loop of this run still going aborts its call
    events.push(writer.append(row.id, 'run.finished', SYSTEM, { run_id: run.id, phase: envelope.phase, stop_reason: envelope.stop_reason }, now));
  }

  const apply: ApplyMove = (row, spec, now, events) => {
    const staged = noMovesStaged();
    return commit(stage(row, spec, now, events, staged), now, events, staged);
  };
  parts.set(apply, { stage, commit });
  return apply;
}

/**
 * Takes a task away from a claim that is gone (lease ran out, daemon died): back to
 * pending, or failed when its last attempt was spent. Returns where it went.
 */
export function reclaim(apply: ApplyMove, row: TaskRow, reason: string, now: number, events: TaskEvent[]): 'pending' | 'failed' {
  const spec = reclaimSpec(row, reason);
  apply(row, spec, now, events);
  return spec.to as 'pending' | 'failed';
}
