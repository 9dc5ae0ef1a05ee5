/**
 * Following the event log across processes: read `task_events` by cursor, and when caught
 * up, wait for the store's change notification (a commit anywhere) instead of sleeping.
 */
import type { TaskStore } from './store.js';
import type { TaskEvent } from './types.js';

export interface FollowOptions {
  /** Start after this event id. @defaultValue 0 (the whole log) */
  afterId?: number;
  taskId?: number;
  /** Ends the iteration. */
  signal?: AbortSignal;
  /** Rows read per query. @defaultValue 500 */
  batch?: number;
}

/**
 * Yields every event after the cursor, in order, then new ones as they commit, until aborted:
 * a lone follower (a hub of its own; a TaskManager's followers share one, `tm.follow`).
 */
export async function* followEvents(store: TaskStore, opts: FollowOptions = {}): AsyncGenerator<TaskEvent, void, undefined> {
  yield* createFollowHub(store).follow(opts);
}

/** Rows a hub reads per query. */
const HUB_BATCH = 500;

/** A follower in step with the hub, waiting for its next read. */
interface Waiter {
  cursor: number;
  taskId: number | undefined;
  settle(outcome: { events: TaskEvent[]; to: number } | { error: unknown } | undefined): void;
}

export interface FollowHub {
  /** As followEvents, sharing the hub's reads while in step with it. */
  follow(opts?: FollowOptions): AsyncGenerator<TaskEvent, void, undefined>;
}

/**
 * The followers of one store in one process (a TaskManager's) share their reads. Each
 * follower on its own read the log after every commit anywhere: fifty SSE clients of the
 * board made fifty reads of each commit, and a `taskloop serve` with them fell behind the
 * log. Here one read serves every follower that is caught up and waiting; a follower that
 * is behind (a replay from an old cursor, a slow consumer) reads on its own, as before, until
 * it is in step again. Each still sees every event after its cursor once, in order: the hub
 * reads with the same cursor rule as a lone follower (on PostgreSQL, only below the settled
 * horizon), and hands a read's rows to the waiters whose cursor it covers.
 */
export function createFollowHub(store: TaskStore): FollowHub {
  const waiters = new Set<Waiter>();
  // The hub's cursor: every event up to it was handed to the waiters of the read that found it.
  // Always a point of the log (a read's last id, or a follower's cursor clamped to the newest
  // event): a cursor a client made up, past the end, must not become the hub's.
  // It is kept when every follower has left, so a read still under way has a place to end.
  let head: number | undefined;
  // Whether the log may hold events after `head` (a commit since the last read, or a full batch).
  let behind = true;
  let reading = false;
  let followers = 0;
  let unwatch: (() => void) | undefined;

  const read = async (): Promise<void> => {
    if (reading) return;
    reading = true;
    try {
      while (behind && waiters.size > 0 && head !== undefined) {
        behind = false;
        const from = head;
        let events: TaskEvent[];
        try {
          events = await store.readEvents({ afterId: from, limit: HUB_BATCH });
        } catch (error) {
          const failed = [...waiters];
          waiters.clear();
          for (const w of failed) w.settle({ error });
          behind = true;
          return;
        }
        if (events.length === HUB_BATCH) behind = true;
        const to = events.length > 0 ? events[events.length - 1]!.id : from;
        head = to;
        const served = [...waiters];
        waiters.clear();
        for (const w of served) w.settle({ events, to });
      }
    } finally {
      reading = false;
    }
  };

  const join = (): void => {
    if (followers++ === 0) {
      behind = true;
      unwatch = store.watch(() => {
        behind = true;
        void read();
      });
    }
  };
  const leave = (): void => {
    if (--followers === 0) {
      unwatch?.();
      unwatch = undefined;
    }
  };

  /** Waits for the hub's next read; undefined once aborted. */
  const wait = (cursor: number, taskId: number | undefined, signal: AbortSignal | undefined) =>
    new Promise<{ events: TaskEvent[]; to: number } | { error: unknown } | undefined>((resolve) => {
      const onAbort = (): void => {
        waiters.delete(waiter);
        resolve(undefined);
      };
      const waiter: Waiter = {
        cursor,
        taskId,
        settle(outcome) {
          signal?.removeEventListener('abort', onAbort);
          resolve(outcome);
        },
      };
      if (signal?.aborted === true) return resolve(undefined);
      signal?.addEventListener('abort', onAbort, { once: true });
      waiters.add(waiter);
      void read();
    });

  return {
    async *follow(opts = {}) {
      const { taskId, signal } = opts;
      const limit = opts.batch ?? HUB_BATCH;
      const aborted = (): boolean => signal?.aborted === true;
      // Events at or below `floor` are not this follower's; `cursor` is its place in the log,
      // never past the newest event (a Last-Event-ID a client made up, far ahead, would
      // otherwise become the hub's head and blind every other follower).
      const floor = opts.afterId ?? 0;
      let cursor = floor > 0 ? Math.min(floor, await store.lastEventId()) : floor;
      // Whether every event at or below the cursor was seen (or is not this follower's): always
      // for the whole log; for one task, once a read of its events came back short after a
      // point of the whole log was known (the hub's head, or the newest event id).
      let whole = taskId === undefined;
      join();
      try {
        while (!aborted()) {
          // Nobody waits and no read is under way: the hub starts again from this cursor.
          if (whole && waiters.size === 0 && !reading && cursor !== head) {
            head = cursor;
            behind = true;
          }
          if (whole && head !== undefined && cursor >= head) {
            const outcome = await wait(cursor, taskId, signal);
            if (outcome === undefined) return;
            if ('error' in outcome) throw outcome.error;
            for (const event of outcome.events) {
              if (event.id <= cursor || event.id <= floor || (taskId !== undefined && event.taskId !== taskId)) continue;
              cursor = event.id;
              yield event;
              if (aborted()) return;
            }
            cursor = Math.max(cursor, outcome.to);
            continue;
          }
          // Behind the hub: read on its own. A read that comes back short has seen, for its
          // task, every event that had committed at or below `seen` before it began.
          const seen = head ?? (whole ? undefined : await store.lastEventId());
          const events = await store.readEvents({ afterId: cursor, taskId, limit });
          for (const event of events) {
            cursor = event.id;
            if (event.id <= floor) continue;
            yield event;
            if (aborted()) return;
          }
          if (events.length < limit && seen !== undefined) {
            cursor = Math.max(cursor, seen);
            whole = true;
          }
        }
      } finally {
        leave();
      }
    },
  };
}
