/**
 * What every command shares: the database, the acting identity, output in text or JSON.
 * Commands that only read open the file read-only (READ_ONLY_COMMANDS): they create nothing
 * (a missing file is STORE_NOT_FOUND), and a user who may only read the file can run them.
 */
import { resolve } from 'node:path';
import {
  type Actor,
  type Durability,
  EngineError,
  OPERATOR,
  agentActor,
  type RunStore,
  type ScheduleStore,
  type SqliteTaskStore,
  type Stores,
  type TaskManager,
  createStores,
  createTaskManager,
  isDatabaseUrl,
  redactUrl,
} from '../engine/index.js';
import { printable } from '../engine/text.js';

export interface GlobalOptions {
  db?: string;
  json?: boolean;
  as?: string;
  durability?: string;
}

export const DEFAULT_DB = 'data/taskloop.db';

/** Commands (by their path, `task list`) that never write: they open the database read-only. */
export const READ_ONLY_COMMANDS: ReadonlySet<string> = new Set([
  'task list',
  'task show',
  'events',
  'stats',
  'approvals list',
  'tickets list',
  'tickets show',
  'schedule list',
  'backup',
  'info',
]);

/** A command used the wrong way (exit 2), as opposed to a refusal by the engine (exit 1). */
export class UsageError extends Error {
  readonly code = 'USAGE';
}

export interface CliContext {
  readonly json: boolean;
  /** The database: a SQLite file's absolute path, or a `postgres://` URL. */
  readonly dbPath: string;
  readonly durability: Durability;
  /** `operator` unless `--as NAME` names an agent. */
  readonly actor: Actor;
  manager(): TaskManager;
  /** Runs, steps, controls, breakers, approvals … of the same database. */
  runs(): RunStore;
  schedules(): ScheduleStore;
  /** The SQLite store, for what only a file has (backup); refused on PostgreSQL. */
  sqlite(what: string): SqliteTaskStore;
  /** A progress line for long-running commands: stderr, so stdout stays data. */
  log(line: string): void;
  /** Writes one line (or block) to standard output as is. */
  stdout(text: string): void;
  /** Prints a result: JSON as given, or the text the command formats. */
  out(value: unknown, text: () => string): void;
  close(): Promise<void>;
}

export function dbPathFrom(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env): string {
  const given = opts.db ?? env.TASKLOOP_DB ?? DEFAULT_DB;
  if (/^postgres(ql)?:\/\//.test(given)) return given;
  // Any other URL is not a file name: taken as one, `file://…` would become a folder `file:`.
  if (isDatabaseUrl(given)) {
    throw new UsageError(`--db (or TASKLOOP_DB): '${redactUrl(given)}' is a URL taskloop cannot store tasks at (give a SQLite file's path, or a postgres:// URL)`);
  }
  return resolve(given);
}

/** `command` is the command's path (`task list`); those in READ_ONLY_COMMANDS open the file read-only. */
export function createContext(opts: GlobalOptions, stdout: (s: string) => void, stderr: (s: string) => void, command = ''): CliContext {
  const durability = opts.durability ?? 'normal';
  if (durability !== 'normal' && durability !== 'full') {
    throw new EngineError('VALIDATION_FAILED', `--durability: '${durability}' is not normal or full`);
  }
  const dbPath = dbPathFrom(opts);
  let tm: TaskManager | undefined;
  let stores: Stores | undefined;
  const open = (): Stores =>
    (stores ??= createStores({ database: dbPath, durability: durability as Durability, readonly: READ_ONLY_COMMANDS.has(command) }));
  return {
    json: opts.json === true,
    dbPath,
    durability: durability as Durability,
    actor: opts.as === undefined ? OPERATOR : agentActor(opts.as, '--as'),
    manager() {
      tm ??= createTaskManager({ store: open().store });
      return tm;
    },
    runs: () => open().runs,
    schedules: () => open().schedules,
    sqlite(what) {
      const file = open().sqlite;
      if (file === undefined) throw new EngineError('VALIDATION_FAILED', `${what} works on a SQLite file only; this database is ${redactUrl(dbPath)}`);
      return file;
    },
    stdout,
    log(line) {
      // A log line may carry what an agent or a tool wrote (an error's message): one line, escaped.
      stderr(this.json ? printable(JSON.stringify({ log: line, at: new Date().toISOString() })) : `${new Date().toISOString()} ${printable(line)}`);
    },
    out(value, text) {
      // JSON escapes C0 itself; printable escapes C1, separators and bidi characters the same
      // way (`\u009b`), so a program reads the same value and a person's terminal is safe.
      stdout(this.json ? printable(JSON.stringify(value)) : text());
    },
    async close() {
      // The TaskManager closes the store it wraps; the ports share its connection.
      if (tm !== undefined) await tm.close();
      else await stores?.store.close();
    },
  };
}
