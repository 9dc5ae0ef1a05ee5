/**
 * Cross-process change notification for one SQLite file. A commit by any process writes
 * the `-wal` file, which inotify (fs.watch on the folder) reports at once; the watcher then
 * confirms with `PRAGMA data_version`, which changes only when another connection commits.
 * A slow fallback poll of data_version covers a missed file event.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { type Db, dataVersion } from './connection.js';

export interface ChangeWatcher {
  subscribe(listener: () => void): () => void;
  /** Tells subscribers about a commit made on this connection (data_version ignores those). */
  notifyLocal(): void;
  close(): void;
}

/** @param fallbackMs interval of the data_version poll that backs up the file watch. */
export function createChangeWatcher(db: Db, path: string, fallbackMs = 50): ChangeWatcher {
  const listeners = new Set<() => void>();
  const walName = `${basename(path)}-wal`;
  let version = 0;
  let fsWatcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  let scheduled = false;

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
  const check = (): boolean => {
    if (!db.open) return false;
    const v = dataVersion(db);
    if (v === version) return false;
    version = v;
    schedule();
    return true;
  };
  // The file event can arrive between the WAL write and the wal-index update that makes
  // the commit visible; if the version has not moved yet, look again a moment later.
  let followUp: NodeJS.Timeout | undefined;
  const onFileEvent = (): void => {
    if (check() || followUp !== undefined) return;
    let delay = 1;
    const again = (): void => {
      if (check() || delay > 64) {
        followUp = undefined;
        return;
      }
      delay *= 4;
      followUp = setTimeout(again, delay);
    };
    followUp = setTimeout(again, delay);
  };

  const start = (): void => {
    version = dataVersion(db);
    try {
      fsWatcher = watch(dirname(path), { persistent: false }, (_event, file) => {
        if (file === walName || file === null) onFileEvent();
      });
      fsWatcher.on('error', () => stopFs());
    } catch {
      fsWatcher = undefined;
    }
    timer = setInterval(check, fallbackMs);
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
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };

  return {
    subscribe(listener) {
      listeners.add(listener);
      if (listeners.size === 1 && path !== ':memory:') start();
      return () => {
        listeners.delete(listener);
        if (listeners.size === 0) stop();
      };
    },
    notifyLocal() {
      if (listeners.size > 0) schedule();
    },
    close() {
      listeners.clear();
      stop();
    },
  };
}
