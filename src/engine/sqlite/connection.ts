/**
 * Opening a SQLite file the way every taskloop connection must: WAL, busy_timeout,
 * foreign keys, the chosen durability, migrations applied. One connection per thread.
 * This is the only module besides the SQLite adapters that imports better-sqlite3.
 */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EngineError } from '../errors.js';
import { migrate } from './migrations.js';

export type Db = Database.Database;
export type Durability = 'normal' | 'full';

export interface OpenOptions {
  /** Path of the database file; created with its folder when missing. */
  path: string;
  /** `normal` (synchronous=NORMAL: a power loss may lose the last commits, never corrupt) or `full`. @defaultValue 'normal' */
  durability?: Durability;
  /** How long one statement waits for the write lock before SQLITE_BUSY. @defaultValue 5000 */
  busyTimeoutMs?: number;
  readonly?: boolean;
}

const BUSY_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'SQLITE_LOCKED']);

export function isBusyError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && BUSY_CODES.has(code);
}

/** Runs `fn` again on SQLITE_BUSY with jittered exponential backoff; other errors pass. */
export async function retryBusy<T>(fn: () => T, what: string, maxWaitMs = 60_000): Promise<T> {
  const started = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err)) throw err;
      if (Date.now() - started > maxWaitMs) {
        throw new EngineError('STORE_BUSY', `${what}: the database stayed locked for ${maxWaitMs} ms; nothing was written`);
      }
      const cap = Math.min(200, 2 ** Math.min(attempt, 8));
      await sleep(1 + Math.random() * cap);
    }
  }
}

/** Synchronous variant for start-up paths that cannot await (opening, migrating). */
function retryBusySync<T>(fn: () => T, maxWaitMs = 60_000): T {
  const started = Date.now();
  const cell = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      return fn();
    } catch (err) {
      if (!isBusyError(err) || Date.now() - started > maxWaitMs) throw err;
      Atomics.wait(cell, 0, 0, 1 + Math.random() * Math.min(100, 2 ** attempt));
    }
  }
}

export function openDatabase(opts: OpenOptions): Db {
  if (!opts.readonly && opts.path !== ':memory:') mkdirSync(dirname(opts.path), { recursive: true });
  const db = new Database(opts.path, { readonly: opts.readonly ?? false });
  try {
    db.pragma(`busy_timeout = ${opts.busyTimeoutMs ?? 5000}`);
    // Several processes may open a fresh file at once: switching to WAL can hit SQLITE_BUSY.
    if (!opts.readonly) retryBusySync(() => db.pragma('journal_mode = WAL'));
    db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
    db.pragma('foreign_keys = ON');
    if (!opts.readonly) retryBusySync(() => migrate(db));
    return db;
  } catch (err) {
    db.close();
    throw err;
  }
}

/** The `PRAGMA data_version` of this connection: it changes when another connection commits. */
export function dataVersion(db: Db): number {
  return db.pragma('data_version', { simple: true }) as number;
}
