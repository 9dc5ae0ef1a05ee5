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

/** Yields every event after the cursor, in order, then new ones as they commit, until aborted. */
export async function* followEvents(store: TaskStore, opts: FollowOptions = {}): AsyncGenerator<TaskEvent, void, undefined> {
  let cursor = opts.afterId ?? 0;
  let wake: (() => void) | undefined;
  let dirty = true;
  const unsubscribe = store.watch(() => {
    dirty = true;
    wake?.();
  });
  const onAbort = (): void => wake?.();
  const aborted = (): boolean => opts.signal?.aborted === true;
  opts.signal?.addEventListener('abort', onAbort);
  try {
    while (!aborted()) {
      if (!dirty) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (dirty || aborted()) resolve();
        });
        wake = undefined;
        continue;
      }
      dirty = false;
      for (;;) {
        const events = await store.readEvents({ afterId: cursor, taskId: opts.taskId, limit: opts.batch ?? 500 });
        for (const event of events) {
          cursor = event.id;
          yield event;
          if (aborted()) return;
        }
        if (events.length < (opts.batch ?? 500)) break;
      }
    }
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    unsubscribe();
  }
}
