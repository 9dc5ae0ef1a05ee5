import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { runCli } from '../../src/cli/main.js';
import { ROOT } from '../helpers.js';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process against `db`, capturing its output. */
export async function cli(db: string, ...args: string[]): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(['--db', db, ...args], { stdout: (l) => out.push(l), stderr: (l) => err.push(l) });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

export async function cliJson<T = Record<string, unknown>>(db: string, ...args: string[]): Promise<T> {
  const r = await cli(db, '--json', ...args);
  if (r.code !== 0) throw new Error(`taskloop ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

/** Runs the real bin/taskloop in a child process. */
export function spawnCli(args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [join(ROOT, 'bin/taskloop'), ...args],
      { env: { ...process.env, ...opts.env }, ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }) },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
        resolve({ code, stdout: stdout.trim(), stderr: stderr.trim() });
      },
    );
    child.stdin?.end(opts.input ?? '');
  });
}
