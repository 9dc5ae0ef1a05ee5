/** Runs and steps as read for a caller (a run with its steps, a task's runs, a run's screen): no fence, no write. */
import { EngineError } from '../errors.js';
import type { Run, ScreenInfo, Step } from '../runs.js';
import { RUN_COLUMNS, type RunRow, type StepRow, runRowOf, toRun, toStep } from '../run-rows.js';
import type { Db } from './connection.js';

export interface RunReads {
  getRun(runId: number): Run & { steps: Step[]; screen: ScreenInfo | null };
  runsOf(taskId: number): Run[];
  getScreen(runId: number): (ScreenInfo & { png: Buffer }) | null;
}

export function prepareRunReads(db: Db): RunReads {
  const runById = db.prepare<[number], unknown[]>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`).raw(true);
  const runsOfTask = db.prepare<[number], RunRow>('SELECT * FROM runs WHERE task_id = ? ORDER BY id');
  const stepsOf = db.prepare<[number], StepRow>('SELECT * FROM steps WHERE run_id = ? ORDER BY seq');
  const screenInfo = db.prepare<[number], { seq: number; taken_at: number; bytes: number }>('SELECT seq, taken_at, length(png) AS bytes FROM run_screens WHERE run_id = ?');
  const screenOf = db.prepare<[number], { seq: number; taken_at: number; png: Buffer }>('SELECT seq, taken_at, png FROM run_screens WHERE run_id = ?');
  return {
    getRun(runId) {
      const row = runById.get(runId);
      if (row === undefined) throw new EngineError('RUN_NOT_FOUND', `run ${runId} does not exist`, { run_id: runId });
      const screen = screenInfo.get(runId);
      return { ...toRun(runRowOf(row)), steps: stepsOf.all(runId).map(toStep), screen: screen === undefined ? null : { seq: screen.seq, takenAt: screen.taken_at, bytes: screen.bytes } };
    },
    runsOf: (taskId) => runsOfTask.all(taskId).map(toRun),
    getScreen(runId) {
      const row = screenOf.get(runId);
      return row === undefined ? null : { seq: row.seq, takenAt: row.taken_at, bytes: row.png.length, png: row.png };
    },
  };
}
