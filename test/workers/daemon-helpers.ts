/** Real daemon processes for the daemon tests. */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { ROOT, waitFor } from '../helpers.js';

export const TEST_TOOLS = join(ROOT, 'test/fixtures/test-tools.mjs');

export interface DaemonProcess {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
}

/** `env` replaces the daemon's environment (default: this process's). */
export async function startDaemonProcess(db: string, args: string[] = [], env: NodeJS.ProcessEnv = process.env): Promise<DaemonProcess> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', db, 'daemon', '--tools', TEST_TOOLS, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const lines: string[] = [];
  let buffer = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    buffer += chunk.toString();
    const parts = buffer.split('\n');
    buffer = parts.pop()!;
    lines.push(...parts);
  });
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const d: DaemonProcess = {
    child,
    lines,
    exited,
    waitForLine: (re, timeoutMs = 20_000) => waitFor(() => lines.find((l) => re.test(l)), timeoutMs, `a daemon line matching ${re}\n${lines.join('\n')}`),
  };
  await d.waitForLine(/daemon .* started/);
  return d;
}

/** A complete card for the daemon tests. */
export function daemonCard(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    goal: 'daemon test',
    planner: 'scripted',
    allowed_tools: ['noop'],
    budget: { max_steps: 20 },
    acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
    script: [{ action: 'tool', tool: 'noop' }, { action: 'done' }],
    ...over,
  };
}
