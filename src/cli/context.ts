/** What every command shares: the database, the acting identity, output in text or JSON. */
import { resolve } from 'node:path';
import {
  type Actor,
  type Durability,
  EngineError,
  OPERATOR,
  agentActor,
  type TaskManager,
  createSqliteStore,
  createTaskManager,
} from '../engine/index.js';

export interface GlobalOptions {
  db?: string;
  json?: boolean;
  as?: string;
  durability?: string;
}

export const DEFAULT_DB = 'data/taskloop.db';

/** A command used the wrong way (exit 2), as opposed to a refusal by the engine (exit 1). */
export class UsageError extends Error {
  readonly code = 'USAGE';
}

export interface CliContext {
  readonly json: boolean;
  readonly dbPath: string;
  readonly durability: Durability;
  /** `operator` unless `--as NAME` names an agent. */
  readonly actor: Actor;
  manager(): TaskManager;
  /** A progress line for long-running commands: stderr, so stdout stays data. */
  log(line: string): void;
  /** Writes one line (or block) to standard output as is. */
  stdout(text: string): void;
  /** Prints a result: JSON as given, or the text the command formats. */
  out(value: unknown, text: () => string): void;
  close(): Promise<void>;
}

export function dbPathFrom(opts: GlobalOptions, env: NodeJS.ProcessEnv = process.env): string {
  return resolve(opts.db ?? env.TASKLOOP_DB ?? DEFAULT_DB);
}

export function createContext(opts: GlobalOptions, stdout: (s: string) => void, stderr: (s: string) => void): CliContext {
  const durability = opts.durability ?? 'normal';
  if (durability !== 'normal' && durability !== 'full') {
    throw new EngineError('VALIDATION_FAILED', `--durability: '${durability}' is not normal or full`);
  }
  const dbPath = dbPathFrom(opts);
  let tm: TaskManager | undefined;
  return {
    json: opts.json === true,
    dbPath,
    durability: durability as Durability,
    actor: opts.as === undefined ? OPERATOR : agentActor(opts.as, '--as'),
    manager() {
      tm ??= createTaskManager({ store: createSqliteStore({ path: dbPath, durability: durability as Durability }) });
      return tm;
    },
    stdout,
    log(line) {
      stderr(this.json ? JSON.stringify({ log: line, at: new Date().toISOString() }) : `${new Date().toISOString()} ${line}`);
    },
    out(value, text) {
      stdout(this.json ? JSON.stringify(value) : text());
    },
    async close() {
      await tm?.close();
    },
  };
}
