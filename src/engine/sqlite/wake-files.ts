/**
 * Wake files: one small file per topic beside the database (`<db>-wake-work`,
 * `<db>-wake-controls`), written one byte after a commit that concerns the topic, and
 * watched (inotify, fs.watch on the file itself) by the processes waiting for it.
 *
 * Why: watching the folder hears every commit of every process as 4–6 file events (each
 * WAL frame written, each checkpoint), and each woke every daemon thread to read
 * data_version and look for a task: an idle daemon with two threads spent ~0.5 ms of CPU
 * per commit made elsewhere (measured in BENCHMARKS.md, issue 12 session 11), and two
 * daemons on one file each paid it for the other's every step. Claimers care only for
 * commits that can make a task claimable, and runs only for stop, pause and resume: the
 * same split the PostgreSQL adapter makes with its NOTIFY channels (postgres/watch.ts).
 *
 * A signal is a hint, never the record: it is sent after the commit, and a signal lost (a
 * crash between commit and signal, a writer that does not send them, a file deleted) is
 * covered by the watcher's poll of data_version (watch.ts, 50 ms by default).
 *
 * Another local user must not turn this into a way in: the file is opened without following
 * a symlink, without blocking on a FIFO, and used only if it is a regular file this user
 * owns; anything else is left alone and the poll does the work.
 */
import { type FSWatcher, closeSync, constants, fstatSync, openSync, watch, writeSync } from 'node:fs';

/** What a wake file is for: claimers (`work`) or runs watching their control (`controls`). */
export type WakeTopic = 'work' | 'controls';

const ZERO = Buffer.alloc(1);
const FLAGS = constants.O_WRONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

export function wakeFile(dbPath: string, topic: WakeTopic): string {
  return `${dbPath}-wake-${topic}`;
}

/** Opens the wake file (creating it, mode 0600, for a watcher), or undefined when it is missing or not ours to use. */
function openOwn(file: string, create: boolean): number | undefined {
  let fd: number;
  try {
    fd = openSync(file, create ? FLAGS | constants.O_CREAT : FLAGS, 0o600);
  } catch {
    return undefined; // a symlink, a FIFO with no reader, a folder we may not write
  }
  try {
    const st = fstatSync(fd);
    const uid = process.getuid?.();
    if (st.isFile() && (uid === undefined || st.uid === uid)) return fd;
  } catch {
    // fall through: not usable
  }
  closeSync(fd);
  return undefined;
}

/**
 * Writes one byte to the topic's wake file; never throws (the poll covers a lost signal).
 * Only a watcher creates the file: a writer with no one watching (a CLI command, a library
 * that never claims) leaves nothing beside the database.
 */
export function signalWake(dbPath: string, topic: WakeTopic): void {
  const fd = openOwn(wakeFile(dbPath, topic), false);
  if (fd === undefined) return;
  try {
    writeSync(fd, ZERO, 0, 1, 0);
  } catch {
    // a full disk, say: the poll covers it
  } finally {
    closeSync(fd);
  }
}

/**
 * Calls `onSignal` for each signal on the topic's wake file until the returned close is
 * called. Undefined when the file cannot be watched (not ours, no inotify): poll only. A
 * file deleted or replaced under the watch is watched again (and `onSignal` called once, for
 * a signal that may have gone to the old file).
 */
export function watchWake(dbPath: string, topic: WakeTopic, onSignal: () => void): (() => void) | undefined {
  const file = wakeFile(dbPath, topic);
  let watcher: FSWatcher | undefined;
  let closed = false;
  const start = (): boolean => {
    const fd = openOwn(file, true);
    if (fd === undefined) return false;
    closeSync(fd);
    try {
      watcher = watch(file, { persistent: false }, (event) => {
        if (event === 'rename') restart();
        else onSignal();
      });
      watcher.on('error', () => restart());
      return true;
    } catch {
      watcher = undefined;
      return false;
    }
  };
  const restart = (): void => {
    watcher?.close();
    watcher = undefined;
    if (closed) return;
    // Once, a moment later: a rename storm must not spin this thread.
    setTimeout(() => {
      if (!closed && watcher === undefined && start()) onSignal();
    }, 10).unref();
  };
  if (!start()) return undefined;
  return () => {
    closed = true;
    watcher?.close();
    watcher = undefined;
  };
}
