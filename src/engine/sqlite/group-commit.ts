/**
 * Group commit: the writes a connection is asked for within one turn of its thread's event
 * loop go into one transaction, each under a savepoint of its own.
 *
 * Why: a daemon thread holds many runs, and a commit's cost is mostly per commit, not per
 * write (BEGIN IMMEDIATE and COMMIT, and one WAL frame for every page the commit changed: the
 * right edge of the event log, the index pages of the task states, the runs and steps tables
 * are the same pages for every run). One run's claim writes ~14 frames and its ending ~18;
 * thirty-two of them in one commit share most of those pages. Measured in one thread with 32
 * one-tool runs in flight (BENCHMARKS.md): ~1.5 → ~0.8 ms of CPU per task.
 *
 * What holds, write by write, as without it:
 * - each write is all or nothing: one the engine refuses (an EngineError: a stale claim, a
 *   refused move) is rolled back to its savepoint and rejects with its own error; the others
 *   in the batch commit;
 * - so is one whose own JavaScript throws (a RangeError serialising a value too big for a
 *   string, a TypeError): that is the write's failure, not the batch's. One agent's run whose
 *   ending would not serialise failed every write batched with it, other agents' runs'
 *   claims, tool outcomes and endings among them (their steps then counted it on the tool's
 *   breaker: session 33's review, F1);
 * - an error of SQLite's own is the store's fault, not the write's (SQLITE_FULL, an I/O
 *   error, corruption; SQLite may already have rolled the whole transaction back): the whole
 *   batch is rolled back and every write in it rejects with that fault, named by the store
 *   (STORE_FULL starts the disk-full recovery, corruption stops the store's writes). Going on
 *   would let a later write's savepoint commit on its own outside the batch, or write into a
 *   damaged file; so is any error once the transaction is gone;
 * - each caller gets its own value and its own events, and hears only after the commit;
 * - within a batch, writes run in the order they were asked for; between batches, as between
 *   writes without group commit, a write that waits out another process's lock may be
 *   overtaken by a later one (a run's journal keeps one write of the run in flight);
 * - lock contention retries the whole batch (store.write), before any write of it has run;
 *   while another thread of this process holds the write lock, the batch stays open and the
 *   writes asked for in the turns it waits join it (one commit, where each turn waited made
 *   one of its own: a daemon's two threads took turns at the lock).
 * A lone write goes as before, one hop of the event loop later.
 */
import { appendAll } from '../append-all.js';
import type { WriteOutcome } from '../store.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import { sqliteCode } from './faults.js';
import { whenUnlocked } from './write-lock.js';

type Body<T> = (events: TaskEvent[], now: number) => T;
/** The store's own write: one transaction, retried on lock contention, faults named. */
export type WriteNow = <T>(what: string, fn: Body<T>) => Promise<WriteOutcome<T>>;

interface Asked {
  what: string;
  fn: Body<unknown>;
  resolve(outcome: WriteOutcome<unknown>): void;
  reject(err: unknown): void;
}
type Done = { ok: true; value: unknown; events: TaskEvent[] } | { ok: false; error: unknown };

export interface GroupCommit {
  write: WriteNow;
  /** Resolves once every write asked for so far has settled (before the connection closes). */
  drain(): Promise<void>;
}

/** `name` turns an error a write threw into the store's error for it (the store's `fail`). */
export function createGroupCommit(db: Db, writeNow: WriteNow, name: (err: unknown, what: string) => unknown, lock?: Int32Array): GroupCommit {
  // Called inside the batch's transaction, better-sqlite3 makes this a savepoint.
  const savepoint = db.transaction((fn: Body<unknown>, events: TaskEvent[], at: number) => fn(events, at));
  let asked: Asked[] = [];
  let scheduled = false;
  // Every batch not yet settled (for drain).
  let inFlight: Promise<unknown> = Promise.resolve();
  const track = (p: Promise<unknown>) => {
    inFlight = Promise.allSettled([inFlight, p]);
  };

  const flush = (): void => {
    // Another thread of this process writes: wait for it with the batch still open, so the
    // writes asked for meanwhile join it (one commit instead of one per turn waited).
    if (lock !== undefined && Atomics.load(lock, 0) !== 0) {
      track(whenUnlocked(lock).then(flush));
      return;
    }
    scheduled = false;
    const batch = asked;
    asked = [];
    if (batch.length === 1) {
      const only = batch[0]!;
      track(writeNow(only.what, only.fn).then(only.resolve, only.reject));
      return;
    }
    // Run again whole if the lock was busy: each try starts from fresh outcomes.
    const body = (events: TaskEvent[], at: number): Done[] =>
      batch.map((a): Done => {
        const own: TaskEvent[] = [];
        try {
          const value = savepoint(a.fn, own, at);
          appendAll(events, own);
          return { ok: true, value, events: own };
        } catch (error) {
          // SQLite's own errors abort the batch; the rest (the engine's refusals, a throw
          // of the write's own code) stay the write's, rolled back to its savepoint.
          if (sqliteCode(error) !== undefined || !db.inTransaction) throw error;
          return { ok: false, error };
        }
      });
    track(writeNow(`${batch.length} writes (${batch[0]!.what} …)`, body).then(
      ({ value }) =>
        value.forEach((done, i) => {
          const a = batch[i]!;
          if (done.ok) a.resolve({ value: done.value, events: done.events });
          else a.reject(name(done.error, a.what));
        }),
      (err: unknown) => {
        for (const a of batch) a.reject(err);
      },
    ));
  };

  return {
    write: <T>(what: string, fn: Body<T>) =>
      new Promise<WriteOutcome<T>>((resolve, reject) => {
        asked.push({ what, fn, resolve: resolve as Asked['resolve'], reject });
        if (!scheduled) {
          scheduled = true;
          setImmediate(flush);
        }
      }),
    async drain() {
      while (scheduled || asked.length > 0) await new Promise<void>((r) => setImmediate(r));
      await inFlight;
    },
  };
}
