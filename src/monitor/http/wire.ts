/** The messages of a task's event stream. Snake_case with ISO times, like everything external. */
import { type Run, type Step, type TaskEvent, toWireEvent, toWireRun, toWireStep } from '../../engine/index.js';
import type { SseMessage } from './sse.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());


/**
 * The task loop's event names (seed 000: run_started … run_finished) for the `task_events`
 * rows that record them. Every other row of the task keeps its type as its event name
 * (`task.claimed`, `approval.requested`, `run.stop_requested` …).
 */
export const LOOP_EVENT_NAMES: Readonly<Record<string, string>> = {
  'run.started': 'run_started',
  'run.resumed': 'run_resumed',
  'run.step_started': 'step_started',
  'run.step_finished': 'step_finished',
  'run.paused': 'run_paused',
  'run.finished': 'run_finished',
};

/** What a stream message may carry beside its row: the step or the finished run it reports, read from the store. */
export interface StreamDetail {
  step?: Step;
  run?: Run;
}

/**
 * One row of a task's event log as an SSE message: id = the row's cursor, event = the loop
 * event name, data = the wire event plus `step` (step_started, step_finished), or `run` and
 * `envelope` (run_finished). Only what cannot change after the row was written is added,
 * so a replay carries the same data as the live stream did.
 */
export function toStreamMessage(row: TaskEvent, detail: StreamDetail = {}): SseMessage {
  const data: Record<string, unknown> = { ...toWireEvent(row) };
  if (detail.step !== undefined) {
    // A step_started message reports the call as it began, however far the step has come since.
    data.step = row.type === 'run.step_started'
      ? { ...toWireStep(detail.step), status: 'started', result: null, error: null, duration_ms: null, finished_at: null }
      : toWireStep(detail.step);
  }
  if (detail.run !== undefined && row.type === 'run.finished') {
    data.run = toWireRun(detail.run);
    data.envelope = detail.run.envelope;
  }
  return { id: row.id, event: LOOP_EVENT_NAMES[row.type] ?? row.type, data };
}
