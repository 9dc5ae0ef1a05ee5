/**
 * Disk full. SQLite rolls a write that meets SQLITE_FULL back whole, and reads keep working;
 * what a store must add is getting the space back and keeping it. The WAL is the culprit:
 * it grows to the auto-checkpoint threshold (16 MiB) before anything copies it back, and
 * even then the file keeps its size, so space freed by an operator is eaten again within
 * seconds by a log that is mostly copied pages.
 *
 * Contract:
 * - On SQLITE_FULL the keeper enters low-space mode and runs a TRUNCATE checkpoint (copy the
 *   log back, cut the file to zero), at once and then retried with backoff until one
 *   succeeds: the checkpoint itself may need space (pages the log added to the end of the
 *   file), and succeeds once the operator frees some.
 * - In low-space mode the connection checkpoints every LOW_CHECKPOINT_PAGES pages and cuts
 *   the log back to what it holds whenever the log restarts (journal_size_limit = 0), so the
 *   `-wal` stays a few dozen KiB instead of filling the disk again.
 * - Before a write, at most once per CHECK_MS, the keeper reads the filesystem's free space
 *   (statfs): below LOW_BYTES it enters low-space mode without waiting for SQLITE_FULL,
 *   above twice that it leaves it and the connection's usual settings return.
 * - Nothing here throws: a keeper that cannot read the free space leaves the mode as it is.
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Db } from './connection.js';

/** Free space under which a connection keeps its log short. */
export const LOW_BYTES = 32 * 1024 * 1024;
const LOW_CHECKPOINT_PAGES = 32;
const CHECK_MS = 1000;
const RETRY_MIN_MS = 20;
const RETRY_MAX_MS = 2000;

export interface SpaceKeeper {
  /** True while the connection keeps its log short. */
  readonly low: boolean;
  /** A write met SQLITE_FULL: low-space mode, and a TRUNCATE checkpoint now and until one succeeds. */
  full(): void;
  /** Before a write: re-reads the free space when the last reading is older than CHECK_MS. */
  beforeWrite(): void;
  close(): void;
}

/** Free bytes for unprivileged users on the filesystem holding `file`, or undefined. */
export function freeBytes(file: string): number | undefined {
  try {
    const s = statfsSync(dirname(file));
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

const mib = (bytes: number): string => `${(bytes / 1048576).toFixed(1)} MiB`;

export function createSpaceKeeper(db: Db, path: string, log: (line: string) => void = () => undefined): SpaceKeeper {
  const usualCheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
  const usualLimit = db.pragma('journal_size_limit', { simple: true }) as number;
  const busyMs = db.pragma('busy_timeout', { simple: true }) as number;
  let low = false;
  let lastRead = 0;
  let retry: NodeJS.Timeout | undefined;
  let retryMs = RETRY_MIN_MS;
  let closed = false;

  const enter = (why: string): void => {
    if (low || !db.open) return;
    low = true;
    db.pragma(`wal_autocheckpoint = ${LOW_CHECKPOINT_PAGES}`);
    db.pragma('journal_size_limit = 0');
    log(`${path}: ${why}: keeping the WAL short (checkpoint every ${LOW_CHECKPOINT_PAGES} pages, truncated at each restart)`);
  };
  const leave = (free: number): void => {
    if (!low || !db.open) return;
    low = false;
    db.pragma(`wal_autocheckpoint = ${usualCheckpoint}`);
    db.pragma(`journal_size_limit = ${usualLimit}`);
    log(`${path}: ${mib(free)} free again: usual WAL checkpoints`);
  };

  /** One TRUNCATE checkpoint without waiting on other connections; true when it completed. */
  const truncate = (): boolean => {
    if (!db.open) return true;
    try {
      db.pragma('busy_timeout = 0');
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
      return r !== undefined && r.busy === 0;
    } catch {
      return false;
    } finally {
      if (db.open) db.pragma(`busy_timeout = ${busyMs}`);
    }
  };
  const attempt = (): void => {
    retry = undefined;
    if (closed) return;
    if (truncate()) {
      retryMs = RETRY_MIN_MS;
      return;
    }
    retry = setTimeout(attempt, retryMs);
    retry.unref();
    retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
  };

  return {
    get low() {
      return low;
    },
    full() {
      try {
        enter('the disk is full');
      } catch {
        // Setting a pragma on a full disk writes nothing; a failure here changes no data.
      }
      lastRead = Date.now();
      if (retry === undefined) attempt();
    },
    beforeWrite() {
      const now = Date.now();
      if (now - lastRead < CHECK_MS) return;
      lastRead = now;
      const free = freeBytes(path);
      if (free === undefined) return;
      try {
        if (free < LOW_BYTES) enter(`${mib(free)} free on the disk`);
        else if (free >= 2 * LOW_BYTES) leave(free);
      } catch {
        // As above: the mode stays as it was.
      }
    },
    close() {
      closed = true;
      if (retry !== undefined) clearTimeout(retry);
      retry = undefined;
    },
  };
}
