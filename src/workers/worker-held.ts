/**
 * The tasks a createWorker's handlers hold, and the watch that aborts a handler whose claim
 * is gone: the task was reclaimed (its lease ran out, or its process was taken for dead),
 * cancelled, or moved by someone else. While it holds a task it looks after every commit
 * anywhere (createWorker subscribes only then) and after each
 * heartbeat; looks are coalesced (one running, at most one queued behind it) and at least
 * LOOK_GAP_MS apart, and a look is one read of the claims this agent holds, whatever the
 * number of handlers: a look per commit that read every held task one by one made a worker
 * with 32 handlers six times slower than one with 1 (each commit cost 32 reads).
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

/** The least time between two looks: a cancelled task's handler hears of it this much later at most. */
export const LOOK_GAP_MS = 20;
/** Claims of this agent read in one look; a held task beyond them is read on its own. */
const LOOK_LIMIT = 1000;

export function createHeldTasks(opts: { tm: TaskManager; agent: string; log: (line: string) => void }): HeldTasks {
  const { tm, agent, log } = opts;
  const all = new Map<number, Held>();
  let stopped = false;

  const stillOurs = (now: Task, h: Held) =>
    (now.state === 'claimed' || now.state === 'in_progress') && now.assignee === agent && now.attempts === h.task.attempts;
  /** The task as it is now; undefined when the read failed (which says nothing about the claim). */
  const readOne = async (h: Held): Promise<Task | undefined> => {
    try {
      return await tm.store.getTask(h.task.id, false);
    } catch (err) {
      if (isEngineError(err) && err.code === 'TASK_NOT_FOUND') return { ...h.task, state: 'cancelled' };
      return undefined;
    }
  };
  const checkAll = async () => {
    const looked = [...all.values()].filter((h) => !h.abort.signal.aborted);
    if (looked.length === 0) return;
    // One read for all: the live claims of this agent name (other processes of the same name
    // included) from the lowest held id on. A held task not among them has left claimed and
    // in_progress, or lies past the limit: it is read on its own, as it was before.
    let current: Map<number, Task>;
    try {
      const from = Math.min(...looked.map((h) => h.task.id));
      const rows = await tm.store.findTasks({ assignee: agent, states: ['claimed', 'in_progress'], afterId: from - 1, limit: LOOK_LIMIT });
      current = new Map(rows.map((t) => [t.id, t]));
    } catch {
      return; // a read that failed says nothing about the claims; the next look tries again
    }
    for (const h of looked) {
      const now = current.get(h.task.id) ?? (await readOne(h));
      // A handler that returned while this look read is no longer held: its task has moved on by its own write.
      if (now === undefined || h.abort.signal.aborted || all.get(h.task.id) !== h) continue;
      if (!stillOurs(now, h)) {
        log(`task ${h.task.id}: claim lost (the task is ${now.state}${now.assignee !== null && now.assignee !== agent ? `, held by ${now.assignee}` : ''}); its handler is aborted`);
        h.abort.abort(new EngineError('STALE_CLAIM', `task ${h.task.id}: the claim of ${agent} was lost (the task is ${now.state})`, { task_id: h.task.id }));
      }
    }
  };

  let checking: Promise<void> | undefined;
  let again = false;
  let lastLook = -Infinity;
  let gap: NodeJS.Timeout | undefined;
  const checkSoon = (): void => {
    if (all.size === 0 || stopped) return;
    if (checking !== undefined || gap !== undefined) {
      again = true;
      return;
    }
    const wait = lastLook + LOOK_GAP_MS - performance.now();
    if (wait > 0) {
      again = true;
      gap = setTimeout(() => {
        gap = undefined;
        if (again) {
          again = false;
          checkSoon();
        }
      }, wait);
      gap.unref();
      return;
    }
    lastLook = performance.now();
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
      clearTimeout(gap);
      gap = undefined;
      await checking;
    },
  };
}
