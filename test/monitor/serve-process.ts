/** `taskloop serve` as a real child process, for the tests that need the whole server (board, /metrics). */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { tokenFileFor } from '../../src/monitor/http/token-file.js';
import { ROOT, waitFor } from '../helpers.js';
import { bearer } from './http-helpers.js';

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  /** The one-time sign-in link it printed. */
  link: string;
  /** The operator's Authorization header (the token it generated into DB.http-token). */
  auth: Record<string, string>;
  lines: string[];
}

/** `taskloop serve --port 0` on `db`; stopped (SIGTERM, then SIGKILL) when the test finishes. */
export async function spawnServe(db: string): Promise<ServeProcess> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', db, 'serve', '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' } });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  });
  const lines: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter((l) => l !== '')));
  child.stdout!.resume();
  const board = await waitFor(() => lines.find((l) => l.startsWith('board: ')), 20_000, `the board line\n${lines.join('\n')}`);
  const url = lines.find((l) => l.startsWith('listening on '))!.slice('listening on '.length);
  return { child, url, link: board.slice('board: '.length).split(' ')[0]!, auth: bearer(readFileSync(tokenFileFor(db), 'utf8').trim()), lines };
}
