/**
 * Wake files: one empty file per topic beside the database (`<db>-wake-work`,
 * `<db>-wake-controls`), whose times are set after a commit that concerns the topic, and
 * watched (inotify, fs.watch on the file itself) by the processes waiting for it. A create
 * wakes only the claimers of its task's queue: it sets the times of its queue's bucket's file
 * (`<db>-wake-work-<bucket>`, claims.ts wakeBucket), which those claimers watch beside the
 * topic's own (the one every other wake of claimers sets).
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
 * Another local user, or an agent with a shell, must not turn this into a way in: the file is
 * opened read-only, without following a symlink or blocking on a FIFO, and used only if it is
 * an empty regular file this user owns with one name (not a hard link to the database);
 * nothing is ever written into it. Anything else is left alone and the poll does the work.
 */
import { type FSWatcher, closeSync, constants, fstatSync, futimesSync, openSync, watch } from 'node:fs';
import type { Db } from './connection.js';

/** What a wake file is for: claimers (`work`) or runs watching their control (`controls`). */
export type WakeTopic = 'work' | 'controls';

const FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/**
 * The topic's wake file; with `bucket` (claims.ts wakeBucket), the file of one bucket of
 * queues: `<db>-wake-work` wakes the claimers of every queue, `<db>-wake-work-<bucket>` those
 * of the queues in that bucket.
 */
export function wakeFile(dbPath: string, topic: WakeTopic, bucket?: string): string {
  return bucket === undefined ? `${dbPath}-wake-${topic}` : `${dbPath}-wake-${topic}-${bucket}`;
}

/**
 * Opens the wake file read-only (creating it, empty and mode 0600, for a watcher), or
 * undefined when it is missing or not ours to use: it must be an empty regular file this user
 * owns with no other name (a hard link to the database, or to any file, is refused).
 */
function openOwn(file: string, create: boolean): number | undefined {
  let fd: number;
  try {
    fd = openSync(file, create ? FLAGS | constants.O_CREAT : FLAGS, 0o600);
  } catch {
    return undefined; // a symlink, a folder we may not write, a missing file
  }
  try {
    const st = fstatSync(fd);
    const uid = process.getuid?.();
    if (st.isFile() && st.nlink === 1 && st.size === 0 && (uid === undefined || st.uid === uid)) return fd;
  } catch {
    // fall through: not usable
  }
  closeSync(fd);
  return undefined;
}

/**
 * Signals the topic: sets the wake file's times (an attribute change, which its watchers
 * hear); nothing is ever written into it. Never throws (the poll covers a lost signal). Only
 * a watcher creates the file: a writer with no one watching (a CLI command, a library that
 * never claims) leaves nothing beside the database.
 */
export function signalWake(dbPath: string, topic: WakeTopic, bucket?: string): void {
  const fd = openOwn(wakeFile(dbPath, topic, bucket), false);
  if (fd === undefined) return;
  try {
    const now = Date.now() / 1000;
    futimesSync(fd, now, now);
  } catch {
    // the poll covers it
  } finally {
    closeSync(fd);
  }
}

// What the transaction in progress on a connection touched that concerns a topic: read and
// cleared after each commit (task-store.ts), so the commit signals the topics it concerns.
const WORK = 1;
const CONTROLS = 2;
const marks = new WeakMap<Db, number>();
const queueMarks = new WeakMap<Db, Set<string>>();

/** Notes that the transaction in progress on `db` concerns `topic` (a dependent freed, a control changed). */
export function markWake(db: Db, topic: WakeTopic): void {
  marks.set(db, (marks.get(db) ?? 0) | (topic === 'work' ? WORK : CONTROLS));
}

/** Notes that the transaction in progress on `db` made tasks of `queue` claimable with no event to say so (tasks fallen due, released). */
export function markWorkIn(db: Db, queue: string): void {
  let queues = queueMarks.get(db);
  if (queues === undefined) queueMarks.set(db, (queues = new Set()));
  queues.add(queue);
}

/** What `markWake` and `markWorkIn` noted on `db` since the last call; forgets it. */
export function takeWakes(db: Db): { work: boolean; controls: boolean; queues: ReadonlySet<string> | undefined } | undefined {
  const m = marks.get(db);
  const queues = queueMarks.get(db);
  if (m === undefined && queues === undefined) return undefined;
  marks.delete(db);
  queueMarks.delete(db);
  return { work: ((m ?? 0) & WORK) !== 0, controls: ((m ?? 0) & CONTROLS) !== 0, queues };
}

/** How often a wake file that cannot be watched (yet) is looked at again. */
export const WAKE_RETRY_MS = 1000;

/**
 * Calls `onSignal` for each signal on the topic's wake file until the returned close is
 * called. While the file cannot be watched (not ours, no inotify, or missing and `create`
 * false: a read-only store creates nothing), the poll alone serves the topic, and the file is
 * looked at again every WAKE_RETRY_MS: once it can be watched (the stray file removed, a
 * watcher elsewhere created it), it is, and `onSignal` is called once for a signal that may
 * have gone unheard. A file deleted or replaced under the watch is watched again the same way.
 */
export function watchWake(dbPath: string, topic: WakeTopic, onSignal: () => void, create = true, bucket?: string): () => void {
  const file = wakeFile(dbPath, topic, bucket);
  let watcher: FSWatcher | undefined;
  let retry: NodeJS.Timeout | undefined;
  let closed = false;
  const start = (): boolean => {
    const fd = openOwn(file, create);
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
  /** Tries again after `ms` (and then every WAKE_RETRY_MS) until it watches or is closed. */
  const later = (ms: number): void => {
    retry = setTimeout(() => {
      retry = undefined;
      if (closed || watcher !== undefined) return;
      if (start()) onSignal();
      else later(WAKE_RETRY_MS);
    }, ms);
    retry.unref();
  };
  const restart = (): void => {
    watcher?.close();
    watcher = undefined;
    // A moment later: a rename storm must not spin this thread.
    if (!closed && retry === undefined) later(10);
  };
  if (!start()) later(WAKE_RETRY_MS);
  return () => {
    closed = true;
    clearTimeout(retry);
    watcher?.close();
    watcher = undefined;
  };
}
