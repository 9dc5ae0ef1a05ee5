/**
 * A run ended outside it: its task failed or was cancelled while the run was open (an
 * operator's cancel, the sweep's reclaim on the last attempt). Both stores close the run in
 * the move that ends its task, from its action steps as stored; this is what they write.
 * Pure: no I/O.
 *
 * Which steps were writes: the store has no tool registry, but a write commits its step
 * before the call (RunStore.beginStep: its `run.step_started` event says `intent: true`),
 * while reads and decisions are written once settled, or begun late by a flush when still
 * running (a `run.step_started` event without `intent`). So the intents of the run say which
 * action steps changed, or may have changed, the world. (A call parked for approval commits
 * its intent too, read or write: once approved and done it is listed, erring toward saying
 * more. A run begun before intents were marked lists none.)
 */
import { type BeginStepInput, UNSURE_RESULT } from './runs.js';
import type { TaskRow } from './task-rows.js';

/** The data of a `run.step_started` event; `intent` marks a call's step committed before the call. */
export function startedData(input: BeginStepInput, seq: number, intent: boolean): Record<string, unknown> {
  const data: Record<string, unknown> = { run_id: input.runId, seq, kind: input.kind, tool: input.tool ?? null };
  if (intent) data.intent = true;
  return data;
}

/** An action step of the run, as stored (`args`, `result`: JSON text). */
export interface ActionRow {
  seq: number;
  tool: string | null;
  args: string | null;
  status: string;
  result: string | null;
}

/** What a begun write that never settled is settled with: it may or may not have happened. */
export const ABANDONED_WRITE_ERROR =
  'its run was ended outside it (the task failed or was cancelled) while the call was begun; the write may or may not have taken effect';
/** What a read still running when its run was ended outside it is settled with. */
export const ABANDONED_READ_ERROR = 'its run was ended outside it (the task failed or was cancelled) while the call was running';

/** How the steps left `started` are settled: a call's intent `unknown`, a read `abandoned` (by seq). */
export function abandonedSettles(actions: readonly ActionRow[], intents: ReadonlySet<number>): { unknown: number[]; abandoned: number[] } {
  const started = actions.filter((a) => a.status === 'started');
  return { unknown: started.filter((a) => intents.has(a.seq)).map((a) => a.seq), abandoned: started.filter((a) => !intents.has(a.seq)).map((a) => a.seq) };
}

/** The result of an idempotent write of unknown outcome, as stored. */
const UNSURE_RESULT_TEXT = JSON.stringify(UNSURE_RESULT);

interface SideEffect {
  tool: string | null;
  args: unknown;
  seq: number;
  status: 'done' | 'unknown';
  repeatable?: true;
}

/**
 * The run's side effects, in step order: a write done (`ok`), and one whose outcome is not
 * known (`unknown`; begun and never settled — the caller settles those `unknown` in the same
 * move; or an idempotent write whose outcome was unknown, `repeatable` under its key).
 */
export function abandonedSideEffects(actions: readonly ActionRow[], intents: ReadonlySet<number>): SideEffect[] {
  const effects: SideEffect[] = [];
  for (const a of actions) {
    if (!intents.has(a.seq)) continue;
    const base = { tool: a.tool, args: a.args === null ? null : (JSON.parse(a.args) as unknown), seq: a.seq };
    if (a.status === 'ok') effects.push({ ...base, status: 'done' });
    else if (a.status === 'started' || a.status === 'unknown') effects.push({ ...base, status: 'unknown' });
    else if (a.status === 'failed' && a.result === UNSURE_RESULT_TEXT) effects.push({ ...base, status: 'unknown', repeatable: true });
  }
  return effects;
}

/** The envelope the run is ended with, naming what may have happened for a person to check. */
export function abandonedRunEnvelope(runId: number, row: TaskRow, steps: number, checkpointVersion: number, effects: readonly SideEffect[] = []) {
  const phase = row.state === 'cancelled' ? 'cancelled' : 'failed';
  const stopReason = row.state === 'cancelled' ? 'task_cancelled' : 'task_failed';
  const unknown = effects.filter((e) => e.status === 'unknown');
  const named = unknown.map((e) => `step ${e.seq} (${e.tool ?? 'a tool'})`).join(', ');
  const them = unknown.length === 1 ? 'it' : 'them';
  return {
    run_id: runId,
    task_id: row.id,
    phase,
    stop_reason: stopReason,
    goal_progress: { completed: [], pending: [] },
    side_effects: effects.map((e) => ({ ...e })),
    evidence: [],
    acceptance: null,
    trace: { used_tools: [], rejected_calls: [], pending_ids: [], step_count: steps },
    safe_resume: {
      condition: unknown.length === 0
        ? `none: the task was ${row.state} outside its run; its steps are the record`
        : `none: the task was ${row.state} outside its run with ${named} of unknown outcome: check whether ${unknown.length === 1 ? 'it' : 'they'} took effect before doing ${them} again; its steps are the record`,
      checkpoint_version: checkpointVersion,
    },
  };
}
