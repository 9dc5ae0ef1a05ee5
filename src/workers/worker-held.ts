/**
 * The tasks a createWorker's handlers hold, and the watch that aborts a handler whose claim
 * is gone: the task was reclaimed (its lease ran out, or its process was taken for dead),
 * cancelled, or moved by someone else. It looks after every commit anywhere and after each
 * heartbeat; looks are coalesced (one running, at most one queued behind it), so a burst of
 * commits costs one read per held task, not one per commit.
 */
import { type ClaimedTask, EngineError, type Task, type TaskManager, isEngineError } from '../engine/index.js';

export interface Held {
  readonly task: ClaimedTask;
  readonly slotId: string;
  readonly abort: AbortController;
  /** close() gave the task back: whatever the handler returns is not written. */
  released: boolean;
}

export interface HeldTasks {
  /** By task id. */
  readonly all: Map<number, Held>;
  /** Looks soon whether each held task is still this worker's claim. */
  checkSoon(): void;
  /** Stops looking; resolves once a look under way has ended. */
  stop(): Promise<void>;
}

export function createHeldTasks(opts: { tm: TaskManager; agent: string; log: (line: string) => void }): HeldTasks {
  const { tm, agent, log } = opts;
  const all = new Map<number, Held>();
  let stopped = false;

  const stillOurs = (now: Task, h: Held) =>
    (now.state === 'claimed' || now.state === 'in_progress') && now.assignee === agent && now.attempts === h.task.attempts;
  const checkAll = async () => {
    for (const h of [...all.values()]) {
      if (h.abort.signal.aborted) continue;
      let now: Task;
      try {
        now = await tm.store.getTask(h.task.id, false);
      } catch (err) {
        if (isEngineError(err) && err.code === 'TASK_NOT_FOUND') now = { ...h.task, state: 'cancelled' };
        else continue; // a read that failed says nothing about the claim
      }
      if (!stillOurs(now, h)) {
        log(`task ${h.task.id}: claim lost (the task is ${now.state}${now.assignee !== null && now.assignee !== agent ? `, held by ${now.assignee}` : ''}); its handler is aborted`);
        h.abort.abort(new EngineError('STALE_CLAIM', `task ${h.task.id}: the claim of ${agent} was lost (the task is ${now.state})`, { task_id: h.task.id }));
      }
    }
  };

  let checking: Promise<void> | undefined;
  let again = false;
  const checkSoon = (): void => {
    if (all.size === 0 || stopped) return;
    if (checking !== undefined) {
      again = true;
      return;
    }
    checking = checkAll().finally(() => {
      checking = undefined;
      if (again) {
        again = false;
        checkSoon();
      }
    });
  };

  return {
    all,
    checkSoon,
    async stop() {
      stopped = true;
      await checking;
    },
  };
}
