/**
 * The `taskloop` command line. Exit codes: 0 ok, 1 refused by the engine (the line names
 * the code), 2 usage error, 3 nothing to claim. Errors are one line on stderr, never a
 * stack trace; with --json, `{"error":{"code":…,"message":…}}`.
 */
import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { isEngineError, storeError } from '../engine/index.js';
import { type CliContext, type GlobalOptions, UsageError, createContext, dbPathFrom } from './context.js';
import { registerBackupCommand } from './backup-command.js';
import { registerInfoCommand } from './info-command.js';
import { registerApprovalCommands } from './approval-commands.js';
import { registerCardCommands } from './card-commands.js';
import { registerDaemonCommands } from './daemon-commands.js';
import { registerDemoCommand } from './demo.js';
import { registerEventCommands } from './event-commands.js';
import { registerScheduleCommands } from './schedule-commands.js';
import { registerServeCommand } from './serve-command.js';
import { registerTicketCommands } from './ticket-commands.js';
import { registerToolCommands } from './tool-commands.js';
import { type Run, registerTaskCommands } from './task-commands.js';
import { oneLine as onOneLine, printable } from '../engine/text.js';

export interface CliIo {
  stdout: (line: string) => void;
  stderr: (line: string) => void;
}

const defaultIo: CliIo = {
  stdout: (line) => process.stdout.write(`${line}\n`),
  stderr: (line) => process.stderr.write(`${line}\n`),
};

/**
 * An error message on one line, printable: a message may quote what an agent wrote (a card's
 * key, an agent's name), whose escape sequences must not reach the operator's terminal.
 * Linear, since the quote may be long.
 */
function oneLine(text: string): string {
  return printable(onOneLine(text).trim());
}

/** `task list` for the `list` subcommand of `task`: the names below the program's. */
function commandPath(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c !== null && c.parent !== null; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Runs the CLI on `argv` (without node and script) and resolves to the exit code. */
export async function runCli(argv: string[], io: CliIo = defaultIo): Promise<number> {
  let exitCode = 0;
  let json = argv.includes('--json');

  const fail = (code: string, message: string, exit: number): void => {
    exitCode = exit;
    // JSON escapes C0 itself; printable over the whole text escapes the rest the same way.
    if (json) io.stderr(printable(JSON.stringify({ error: { code, message: onOneLine(message).trim() } })));
    else io.stderr(`taskloop: ${code === 'USAGE' ? '' : `${code}: `}${oneLine(message)}`);
  };

  const run: Run = async (cmd, action) => {
    const opts = cmd.optsWithGlobals<GlobalOptions>();
    json = opts.json === true;
    let ctx: CliContext | undefined;
    try {
      ctx = createContext(opts, io.stdout, io.stderr, commandPath(cmd));
      const code = await action(ctx);
      if (typeof code === 'number') exitCode = code;
    } catch (thrown) {
      // A SQLite fault from a statement an adapter ran on the connection itself is named here.
      const err = thrown instanceof UsageError ? thrown : storeError(thrown, ctx?.dbPath ?? dbPathFrom(opts), commandPath(cmd));
      if (isEngineError(err)) fail(err.code, err.message, 1);
      else if (err instanceof UsageError) fail('USAGE', err.message, 2);
      else fail('INTERNAL', err instanceof Error ? err.message : String(err), 1);
    } finally {
      await ctx?.close();
    }
  };

  const program = new Command('taskloop')
    .description('a multi-process task engine for AI agents')
    .version(packageVersion(), '-V, --version', 'print the version of taskloop')
    .option('--db <path|url>', 'a SQLite file or a postgres:// URL (default: $TASKLOOP_DB, else data/taskloop.db)')
    .option('--json', 'print snake_case JSON')
    .option('--as <name>', 'act as this agent (default: operator)')
    .option('--durability <mode>', 'normal (default) or full: synchronous=FULL, every commit fsynced')
    .showHelpAfterError(false)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.stdout(s.replace(/\n$/, '')),
      writeErr: (s) => {
        if (!s.startsWith('error:')) io.stderr(s.replace(/\n$/, ''));
      },
      outputError: () => undefined,
    });
  registerTaskCommands(program, run);
  registerEventCommands(program, run);
  registerDaemonCommands(program, run);
  registerApprovalCommands(program, run);
  registerCardCommands(program, run);
  registerDemoCommand(program, run);
  registerScheduleCommands(program, run);
  registerToolCommands(program, run);
  registerTicketCommands(program, run);
  registerServeCommand(program, run);
  registerBackupCommand(program, run);
  registerInfoCommand(program, run);
  for (const sub of program.commands) sub.exitOverride();

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) return 0; // --help, --version
      // No subcommand (`taskloop`, `taskloop task`): commander has printed the help to stderr.
      if (err.code === 'commander.help') return 2;
      fail('USAGE', err.message.replace(/^error: /, ''), 2);
    } else {
      fail('INTERNAL', err instanceof Error ? err.message : String(err), 1);
    }
  }
  return exitCode;
}

/** The version in the package's own package.json (dist/cli/ → the package root). */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
