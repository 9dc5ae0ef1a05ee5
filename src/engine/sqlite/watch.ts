/**
 * Cross-process change notification for one SQLite file. A commit by any process writes
 * the `-wal` file, which inotify (fs.watch on the folder) reports at once; the watcher then
 * confirms with `PRAGMA data_version`, which changes only when another connection commits.
 * A slow fallback poll of data_version covers a missed file event.
 *
 * A poll that fails (a SQLite fault, a connection closed under it) is reported to `onError`
 * and retried, the poll backing off from `fallbackMs` to MAX_BACKOFF_MS while it keeps
 * failing and returning to `fallbackMs` at the first success: it never throws into a timer,
 * where it would take the process down.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { type Db, dataVersion } from './connection.js';

const MAX_BACKOFF_MS = 5000;

export interface ChangeWatcher {
  subscribe(listener: () => void): () => void;
  /** Tells subscribers about a commit made on this connection (data_version ignores those). */
  notifyLocal(): void;
  close(): void;
}

export interface WatchOptions {
  /** Interval of the data_version poll that backs up the file watch. @defaultValue 50 */
  fallbackMs?: number;
  /**
   * Runs before each look at data_version (the file guard's look); `renamed` when the look
   * follows a file being created, deleted or renamed in the folder.
   */
  onTick?: (renamed: boolean) => void;
  /** A look that failed; the watcher goes on. @defaultValue ignore */
  onError?: (err: unknown) => void;
  /** The look after failures succeeded again. @defaultValue nothing */
  onRecovered?: () => void;
}

/** How long the file watch outlives its last subscriber. */
const LINGER_MS = 1000;

export function createChangeWatcher(db: Db, path: string, opts: WatchOptions = {}): ChangeWatcher {
  const fallbackMs = opts.fallbackMs ?? 50;
  const listeners = new Set<() => void>();
  const walName = `${basename(path)}-wal`;
  let version = 0;
  let fsWatcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  let linger: NodeJS.Timeout | undefined;
  let scheduled = false;
  let failing = false;
  let pollMs = fallbackMs;

  const fire = (): void => {
    scheduled = false;
    for (const listener of [...listeners]) {
      try {
        listener();
      } catch {
        // A failing listener must not stop the others; listeners report their own errors.
      }
    }
  };
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    queueMicrotask(fire);
  };
  const check = (renamed: boolean): boolean => {
    let v: number;
    try {
      opts.onTick?.(renamed);
      v = dataVersion(db);
    } catch (err) {
      failing = true;
      pollMs = Math.min(pollMs * 2, MAX_BACKOFF_MS);
      try {
        opts.onError?.(err);
      } catch {
        // The reporter's own failure changes nothing here.
      }
      return false;
    }
    if (failing) {
      failing = false;
      pollMs = fallbackMs;
      opts.onRecovered?.();
    }
    if (v === version) return false;
    version = v;
    schedule();
    return true;
  };
  // The file event can arrive between the WAL write and the wal-index update that makes
  // the commit visible; if the version has not moved yet, look again a moment later.
  let followUp: NodeJS.Timeout | undefined;
  const onFileEvent = (renamed: boolean): void => {
    if (check(renamed) || followUp !== undefined) return;
    let delay = 1;
    const again = (): void => {
      if (check(false) || delay > 64) {
        followUp = undefined;
        return;
      }
      delay *= 4;
      followUp = setTimeout(again, delay);
    };
    followUp = setTimeout(again, delay);
  };
  const poll = (): void => {
    check(false);
    if (timer === undefined) return; // stopped by a listener
    timer = setTimeout(poll, pollMs);
    timer.unref();
  };

  const start = (): void => {
    try {
      version = dataVersion(db);
    } catch {
      // The first poll reports it, and fires the listeners once it reads a version again.
      version = -1;
    }
    try {
      fsWatcher = watch(dirname(path), { persistent: false }, (event, file) => {
        if (file === walName || file === null) onFileEvent(event === 'rename');
      });
      fsWatcher.on('error', () => stopFs());
    } catch {
      fsWatcher = undefined;
    }
    timer = setTimeout(poll, pollMs);
    timer.unref();
  };
  const stopFs = (): void => {
    fsWatcher?.close();
    fsWatcher = undefined;
  };
  const stop = (): void => {
    stopFs();
    if (followUp !== undefined) clearTimeout(followUp);
    followUp = undefined;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };

  return {
    subscribe(listener) {
      listeners.add(listener);
      if (linger !== undefined) {
        clearTimeout(linger);
        linger = undefined;
      } else if (listeners.size === 1 && path !== ':memory:') start();
      return () => {
        if (!listeners.delete(listener) || listeners.size > 0 || path === ':memory:') return;
        // Kept a moment before it stops: runs subscribe and unsubscribe one after another,
        // and starting a file watch costs milliseconds (it was most of a short run's time).
        linger = setTimeout(() => {
          linger = undefined;
          if (listeners.size === 0) stop();
        }, LINGER_MS);
        linger.unref();
      };
    },
    notifyLocal() {
      if (listeners.size > 0) schedule();
    },
    close() {
      listeners.clear();
      clearTimeout(linger);
      linger = undefined;
      stop();
    },
  };
}
