import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, freshManager, waitFor } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';
import { api, card, openStream } from './http-helpers.js';

/** A real `taskloop …` process; resolves with its address once it prints `listening on`. */
async function spawnServing(args: string[]): Promise<{ child: ChildProcess; url: string; lines: string[]; exited: Promise<number | null> }> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TASKLOOP_TOKEN: '' } });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const lines: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter((l) => l !== '')));
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const line = await waitFor(() => lines.find((l) => l.startsWith('listening on ')), 20_000, `the listening line\n${lines.join('\n')}`);
  return { child, url: line.slice('listening on '.length), lines, exited };
}

describe('taskloop serve', () => {
  it('prints its address, serves the API, streams and /metrics, and exits 0 on SIGTERM', async () => {
    const tm = freshManager();
    const served = await spawnServing(['--db', tm.path, 'serve', '--port', '0']);
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await api(served.url, 'GET', '/api/health')).json.status).toBe('ok');
    const id = (await api(served.url, 'POST', '/api/tasks', { title: 't', card: card() })).json.id;
    const stream = await openStream(`${served.url}/api/tasks/${id}/events`);
    await stream.ended;
    expect(stream.events.find((e) => e.event === 'run_finished')!.data.envelope.phase).toBe('completed');
    const metrics = await fetch(`${served.url}/metrics`);
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await metrics.text();
    expect(text).toContain('taskloop_tasks{state="completed"} 1');
    expect(text).toMatch(/taskloop_step_duration_p50_ms\{kind="action"\} \d/);
    served.child.kill('SIGTERM');
    expect(await served.exited).toBe(0);
  });

  it('refuses to bind off loopback without a token (exit 2), and a bad port (exit 1)', async () => {
    const tm = freshManager();
    const open = await spawnCli(['--db', tm.path, 'serve', '--host', '0.0.0.0', '--port', '0'], { env: { TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' } });
    expect(open.code).toBe(2);
    expect(open.stderr).toMatch(/refusing to serve on 0\.0\.0\.0 without a token: set TASKLOOP_TOKEN/);
    const port = await spawnCli(['--db', tm.path, 'serve', '--port', '70000']);
    expect(port.code).toBe(1);
    expect(port.stderr).toMatch(/VALIDATION_FAILED: --port/);
  });

  it('daemon --http serves the same API in the daemon process: attached tasks run in its stream, others on its workers', async () => {
    const tm = freshManager();
    const served = await spawnServing(['--db', tm.path, 'daemon', '--workers', '1', '--http', '0']);
    const queued = (await api(served.url, 'POST', '/api/tasks', { title: 'q', card: card(), attach: false })).json.id;
    const attached = (await api(served.url, 'POST', '/api/tasks', { title: 'a', card: card() })).json.id;
    const stream = await openStream(`${served.url}/api/tasks/${attached}/events`);
    await stream.ended;
    await waitFor(async () => (await tm.getTask(queued)).state === 'completed', 20_000, 'the daemon to run the queued task');
    const [a, q] = await Promise.all([tm.getTask(attached), tm.getTask(queued)]);
    expect(a.state).toBe('completed');
    expect(a.assignee).toMatch(/^http-/);
    expect(q.assignee).toMatch(/^daemon-/);
    served.child.kill('SIGTERM');
    expect(await served.exited).toBe(0);
    expect(served.lines.some((l) => l.includes('daemon stopped'))).toBe(true);
  });
});
