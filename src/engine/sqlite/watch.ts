/**
 * Cross-process change notification for one SQLite file, by topic (as on PostgreSQL):
 * - `all` (followers of the log, waiters for an outcome): a commit by any process writes the
 *   `-wal` file, which inotify (fs.watch on the folder) reports at once; the watcher then
 *   confirms with `PRAGMA data_version`, which changes only when another connection commits.
 * - `work` (claimers) and `controls` (runs watching for stop, pause, resume): the topic's wake
 *   file, written after a commit that concerns it (wake-files.ts). A daemon thread subscribes
 *   to these only, so the other processes' steps and claims no longer wake it. A claimer
 *   names its queue: it hears the wake file of every queue and its queue's bucket's, so a
 *   create in another queue does not wake it (claims.ts workWakeOf). One that names none
 *   hears every commit, as `all` (a create signals only its queue's bucket: one wake file
 *   more for claimers of any queue cost every create a system call, ~8 µs here, for a kind
 *   of claimer taskloop's own hosts never are).
 * A slow fallback poll of data_version covers a missed file event or signal, and a writer
 * that sends no signal: any commit it sees wakes every topic.
 *
 * A poll that fails (a SQLite fault, a connection closed under it) is reported to `onError`
 * and retried, the poll backing off from `fallbackMs` to MAX_BACKOFF_MS while it keeps
 * failing and returning to `fallbackMs` at the first success: it never throws into a timer,
 * where it would take the process down.
 */
import { type FSWatcher, watch } from 'node:fs';
import { basename, dirname } from 'node:path';
import { type WorkWake, wakeBucket, wakeBuckets } from '../claims.js';
import { type Db, dataVersion } from './connection.js';
import { type WakeTopic, watchWake } from './wake-files.js';

const MAX_BACKOFF_MS = 5000;

export type SqliteWatchTopic = 'all' | WakeTopic;
const TOPICS: readonly SqliteWatchTopic[] = ['all', 'work', 'controls'];
const ALL: readonly SqliteWatchTopic[] = ['all'];
const WAKE_TOPICS: readonly SqliteWatchTopic[] = ['work', 'controls'];

export interface ChangeWatcher {
  /** `queue`: a `work` listener's queue (without one it hears every commit, as `all`). */
  subscribe(listener: () => void, topic?: SqliteWatchTopic, queue?: string): () => void;
  /**
   * Tells subscribers about a commit made on this connection (data_version ignores those):
   * `all`'s, and those of the topics the commit concerns (`work`: the claimers it wakes).
   */
  notifyLocal(topics?: readonly WakeTopic[], work?: WorkWake): void;
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
  /** A read-only store's watcher: it creates no wake file (a missing one leaves the topic to the poll). */
  readonly?: boolean;
  /** The look after failures succeeded again. @defaultValue nothing */
  onRecovered?: () => void;
}

/** How long the file watch outlives its last subscriber. */
const LINGER_MS = 1000;

export function createChangeWatcher(db: Db, path: string, opts: WatchOptions = {}): ChangeWatcher {
  const fallbackMs = opts.fallbackMs ?? 50;
  const listeners: Record<SqliteWatchTopic, Set<() => void>> = { all: new Set(), work: new Set(), controls: new Set() };
  // `work` listeners by their queue's bucket (listeners.work stays empty: see subscribe).
  const workers = new Map<string, Set<() => void>>();
  const workCount = (): number => [...workers.values()].reduce((n, set) => n + set.size, 0);
  const count = (): number => listeners.all.size + workCount() + listeners.controls.size;
  const walName = `${basename(path)}-wal`;
  const byFolder = { v: 0 }; // data_version as the folder's watch last saw it
  const byPoll = { v: 0 }; // … and as the poll did
  let running = false; // the poll runs (someone subscribed, or did within LINGER_MS)
  let fsWatcher: FSWatcher | undefined; // the folder's, while `all` has been subscribed
  const wakes = new Map<string, () => void>(); // the wake files' watches, by file suffix
  let timer: NodeJS.Timeout | undefined;
  let linger: NodeJS.Timeout | undefined;
  let lingerAll: NodeJS.Timeout | undefined; // the folder's watch, after `all`'s last listener
  // The topics whose listeners run at the next microtask; for `work`, every bucket or these.
  const due = new Set<SqliteWatchTopic>();
  let dueWork: 'all' | Set<string> | undefined;
  let failing = false;
  let pollMs = fallbackMs;

  const call = (set: Iterable<() => void>): void => {
    for (const listener of [...set]) {
      try {
        listener();
      } catch {
        // A failing listener must not stop the others; listeners report their own errors.
      }
    }
  };
  const fire = (): void => {
    const topics = [...due];
    const work = dueWork;
    due.clear();
    dueWork = undefined;
    for (const topic of topics) {
      if (topic !== 'work') call(listeners[topic]);
      else for (const [bucket, set] of workers) if (work === 'all' || work?.has(bucket) === true) call(set);
    }
  };
  /** Runs `topics`' listeners at the next microtask; `work`: only those of these buckets. */
  const schedule = (topics: readonly SqliteWatchTopic[], work?: ReadonlySet<string>): void => {
    const idle = due.size === 0;
    for (const t of topics) {
      if (t !== 'work') {
        if (listeners[t].size > 0) due.add(t);
        continue;
      }
      if (workCount() === 0) continue;
      due.add(t);
      if (work === undefined) dueWork = 'all';
      else if (dueWork !== 'all') {
        const buckets = dueWork ?? new Set<string>();
        for (const b of work) buckets.add(b);
        dueWork = buckets;
      }
    }
    if (idle && due.size > 0) queueMicrotask(fire);
  };
  /** data_version now, or undefined when the look failed (reported, and the poll backs off). */
  const look = (renamed: boolean): number | undefined => {
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
      return undefined;
    }
    if (failing) {
      failing = false;
      pollMs = fallbackMs;
      opts.onRecovered?.();
    }
    return v;
  };
  // The folder's watch wakes `all`. The poll wakes every topic for a commit it is the first
  // to see, and the topics only for one the folder's watch saw first (it may be one that sent
  // no signal): each keeps its own view of data_version.
  const check = (renamed: boolean): boolean => {
    const v = look(renamed);
    if (v === undefined || v === byFolder.v) return false;
    byFolder.v = v;
    schedule(ALL);
    return true;
  };
  const checkAll = (): void => {
    const v = look(false);
    if (v === undefined || v === byPoll.v) return;
    byPoll.v = v;
    if (v === byFolder.v) schedule(WAKE_TOPICS);
    else {
      byFolder.v = v;
      schedule(TOPICS);
    }
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
    checkAll();
    if (timer === undefined) return; // stopped by a listener
    timer = setTimeout(poll, pollMs);
    timer.unref();
  };

  const startPoll = (): void => {
    running = true;
    try {
      byPoll.v = byFolder.v = dataVersion(db);
    } catch {
      // The first poll reports it, and fires the listeners once it reads a version again.
      byPoll.v = byFolder.v = -1;
    }
    timer = setTimeout(poll, pollMs);
    timer.unref();
  };
  const watchFolder = (): void => {
    try {
      fsWatcher = watch(dirname(path), { persistent: false }, (event, file) => {
        if (file === walName || file === null) onFileEvent(event === 'rename');
      });
      fsWatcher.on('error', () => stopFs());
    } catch {
      fsWatcher = undefined;
    }
  };
  /** Watches a wake file (while it cannot be, because it is not ours to use, the poll alone serves it). */
  const watchFile = (key: string, topic: WakeTopic, onSignal: () => void, bucket?: string): void => {
    if (!wakes.has(key)) wakes.set(key, watchWake(path, topic, onSignal, opts.readonly !== true, bucket));
  };
  /** Starts what `topic`'s listeners need (the poll runs for every topic). */
  const begin = (topic: SqliteWatchTopic, bucket?: string): void => {
    if (path === ':memory:') return;
    if (!running) startPoll();
    if (topic === 'all') {
      clearTimeout(lingerAll);
      lingerAll = undefined;
      if (fsWatcher === undefined) watchFolder();
    } else if (topic === 'controls') {
      watchFile('controls', 'controls', () => schedule(['controls']));
    } else {
      watchFile('work', 'work', () => schedule(['work']));
      watchFile(`work-${bucket}`, 'work', () => schedule(['work'], new Set([bucket!])), bucket);
    }
  };
  const stopFs = (): void => {
    fsWatcher?.close();
    fsWatcher = undefined;
  };
  const stop = (): void => {
    running = false;
    clearTimeout(lingerAll);
    lingerAll = undefined;
    stopFs();
    for (const close of wakes.values()) close();
    wakes.clear();
    if (followUp !== undefined) clearTimeout(followUp);
    followUp = undefined;
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };

  return {
    subscribe(listener, asked = 'all', queue) {
      // A claimer of no queue in particular hears every commit.
      const topic = asked === 'work' && queue === undefined ? 'all' : asked;
      const bucket = topic === 'work' ? wakeBucket(queue!) : undefined;
      let set = listeners[topic];
      if (bucket !== undefined) {
        set = workers.get(bucket) ?? new Set();
        workers.set(bucket, set);
      }
      set.add(listener);
      if (linger !== undefined) {
        clearTimeout(linger);
        linger = undefined;
      }
      begin(topic, bucket);
      return () => {
        if (!set.delete(listener) || path === ':memory:') return;
        if (topic === 'all' && listeners.all.size === 0) {
          // The folder's watch wakes this thread on every commit anywhere (4–6 file events
          // each): it ends, a moment after `all`'s last listener, even while others stay or
          // come (a claimer that subscribes within the moment must not keep it on for good).
          clearTimeout(lingerAll);
          lingerAll = setTimeout(() => {
            lingerAll = undefined;
            if (listeners.all.size === 0) stopFs();
          }, LINGER_MS);
          lingerAll.unref();
        }
        if (count() > 0) return;
        // Kept a moment before it stops: runs subscribe and unsubscribe one after another,
        // and starting a file watch costs milliseconds (it was most of a short run's time).
        linger = setTimeout(() => {
          linger = undefined;
          if (count() === 0) stop();
        }, LINGER_MS);
        linger.unref();
      };
    },
    notifyLocal(topics = [], work) {
      schedule(['all', ...topics.filter((t) => t !== 'work')]);
      if (topics.includes('work') || work !== undefined) schedule(['work'], work === undefined || work.all ? undefined : wakeBuckets(work.queues));
    },
    close() {
      for (const t of TOPICS) listeners[t].clear();
      workers.clear();
      clearTimeout(linger);
      linger = undefined;
      stop();
    },
  };
}
