import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { tokenFileFor } from '../../src/monitor/http/token-file.js';
import { ROOT, freshManager, tempDir, waitFor } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';
import { type Client, api, bearer, card, openStream } from './http-helpers.js';

const NO_TOKENS = { TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' };

interface Serving {
  child: ChildProcess;
  url: string;
  lines: string[];
  exited: Promise<number | null>;
  /** The token file it printed, and the board's one-time link. */
  tokenFile: string;
  link: string;
  /** The server, called with the token from its file. */
  op: Client;
}

/** A real `taskloop …` process; resolves once it printed its address, token file and sign-in link. */
async function spawnServing(args: string[], env: NodeJS.ProcessEnv = NO_TOKENS): Promise<Serving> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const lines: string[] = [];
  child.stderr!.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter((l) => l !== '')));
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const board = await waitFor(() => lines.find((l) => l.startsWith('board: ')), 20_000, `the board line\n${lines.join('\n')}`);
  const url = lines.find((l) => l.startsWith('listening on '))!.slice('listening on '.length);
  const tokenFile = /^operator token: in (\S+) /.exec(lines.find((l) => l.startsWith('operator token: ')) ?? '')?.[1] ?? '';
  const link = board.slice('board: '.length).split(' ')[0]!;
  const token = tokenFile === '' ? (env.TASKLOOP_TOKEN ?? '') : readFileSync(tokenFile, 'utf8').trim();
  return { child, url, lines, exited, tokenFile, link, op: { url, headers: bearer(token) } };
}

describe('taskloop serve', () => {
  it('prints its address, the token file and a one-time sign-in link; serves the API, streams and /metrics to the token only; exits 0 on SIGTERM', async () => {
    const tm = freshManager();
    const served = await spawnServing(['--db', tm.path, 'serve', '--port', '0']);
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(served.tokenFile).toBe(tokenFileFor(tm.path));
    expect(statSync(served.tokenFile).mode & 0o777).toBe(0o600);
    expect(served.link).toMatch(new RegExp(`^${served.url}/\\?signin=[\\w-]{32}$`));
    expect(served.lines.join('\n')).not.toContain(readFileSync(served.tokenFile, 'utf8').trim());

    for (const path of ['/api/health', '/api/tasks', '/metrics']) expect((await api(served.url, 'GET', path)).status, path).toBe(401);
    expect((await api(served.op, 'GET', '/api/health')).json.status).toBe('ok');
    const id = (await api(served.op, 'POST', '/api/tasks', { title: 't', card: card() })).json.id;
    const stream = await openStream(`${served.url}/api/tasks/${id}/events`, served.op.headers);
    await stream.ended;
    expect(stream.events.find((e) => e.event === 'run_finished')!.data.envelope.phase).toBe('completed');
    const metrics = await fetch(`${served.url}/metrics`, { headers: served.op.headers });
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await metrics.text()).toContain('taskloop_tasks{state="completed"} 1');
    // The histogram is fed by the server's event tail, which may trail the stream by a moment.
    await expect.poll(async () => (await fetch(`${served.url}/metrics`, { headers: served.op.headers })).text()).toMatch(/^taskloop_step_duration_seconds_count\{kind="action"\} [1-9]/m);
    // The printed link signs a browser in once.
    const code = new URL(served.link).searchParams.get('signin');
    expect((await api(served.url, 'POST', '/api/session', { code })).status).toBe(200);
    expect((await api(served.url, 'POST', '/api/session', { code })).status).toBe(401);
    served.child.kill('SIGTERM');
    expect(await served.exited).toBe(0);

    // The next start reuses the token; TASKLOOP_TOKEN, when set, replaces it.
    const again = await spawnServing(['--db', tm.path, 'serve', '--port', '0']);
    expect(again.tokenFile).toBe(served.tokenFile);
    expect((await api(again.url, 'GET', '/api/health', undefined, served.op.headers)).status).toBe(200);
    again.child.kill('SIGTERM');
    await again.exited;
    const agentToken = 'an-agents-token-0123456789';
    const configured = await spawnServing(['--db', tm.path, 'serve', '--port', '0'], {
      TASKLOOP_TOKEN: 'configured-token-0123456789',
      TASKLOOP_TOKENS: JSON.stringify({ [agentToken]: { id: 'mallory', role: 'agent' } }),
    });
    expect(configured.tokenFile).toBe('');
    expect((await api(configured.op, 'GET', '/api/health')).status).toBe(200);
    expect((await api(configured.url, 'GET', '/api/health', undefined, served.op.headers)).status).toBe(401);
    // /metrics counts every task, tool and queue: an agent reads only its own tasks, so not it.
    expect((await fetch(`${configured.url}/metrics`, { headers: configured.op.headers })).status).toBe(200);
    const refused = await api(configured.url, 'GET', '/metrics', undefined, bearer(agentToken));
    expect([refused.status, refused.json.error.code]).toEqual([403, 'FORBIDDEN']);
  });

  it('refuses to bind off loopback without a token (exit 2), a bad port, grace or lease (exit 2), an untrusted token file (exit 2) and a reserved name in TASKLOOP_TOKENS (exit 1)', async () => {
    const tm = freshManager();
    const open = await spawnCli(['--db', tm.path, 'serve', '--host', '0.0.0.0', '--port', '0'], { env: NO_TOKENS });
    expect(open.code).toBe(2);
    expect(open.stderr).toMatch(/refusing to serve on 0\.0\.0\.0 without a token: set TASKLOOP_TOKEN/);
    // An option of the process is a usage error (exit 2), as on daemon; nothing is opened first.
    for (const bad of [['--port', '70000'], ['--grace', 'soon'], ['--lease', '0s'], ['--agent', ' ']]) {
      const refused = await spawnCli(['--db', tm.path, 'serve', ...bad]);
      expect(refused.code, bad.join(' ')).toBe(2);
      expect(refused.stderr).toMatch(new RegExp(`^taskloop: ${bad[0]}`));
    }

    const dir = tempDir();
    const planted = join(dir, 'planted.db');
    writeFileSync(join(dir, 'theirs'), 'a-token-someone-else-knows-0123\n', { mode: 0o644 });
    symlinkSync(join(dir, 'theirs'), tokenFileFor(planted));
    const linked = await spawnCli(['--db', planted, 'serve', '--port', '0'], { env: NO_TOKENS });
    expect(linked.code).toBe(2);
    expect(linked.stderr).toMatch(/^taskloop: refusing the token file .*planted\.db\.http-token: it is a symbolic link; remove it/);
    expect(linked.stderr.split('\n')).toHaveLength(1);

    const reserved = await spawnCli(['--db', tm.path, 'serve', '--port', '0'], { env: { TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: JSON.stringify({ 'tok-0123456789abcdef': { id: 'Operator', role: 'agent' } }) } });
    expect(reserved.code).toBe(1);
    expect(reserved.stderr).toMatch(/^taskloop: RESERVED_NAME: TASKLOOP_TOKENS entry 1: 'Operator' is reserved/);
    expect(reserved.stderr).not.toContain('tok-0123456789abcdef');

    // A port another server holds: one line naming it (it was INTERNAL, exit 1), for serve and daemon --http.
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => void holder.close());
    const taken = (holder.address() as AddressInfo).port;
    for (const args of [['serve', '--port', String(taken)], ['daemon', '--workers', '1', '--http', String(taken)]]) {
      const busy = await spawnCli(['--db', tm.path, ...args], { env: NO_TOKENS });
      expect(busy.code, args.join(' ')).toBe(2);
      expect(busy.stderr.split('\n').filter((l) => l.startsWith('taskloop: '))).toEqual([`taskloop: 127.0.0.1:${taken} is in use (another server?): pick another port, or 0 for a free one`]);
    }
  });

  it('daemon --http serves the same API in the daemon process, under the same token: attached tasks run in its stream, others on its workers', async () => {
    const tm = freshManager();
    const served = await spawnServing(['--db', tm.path, 'daemon', '--workers', '1', '--http', '0']);
    expect(served.tokenFile).toBe(tokenFileFor(tm.path));
    expect(served.link).toContain('/?signin=');
    expect((await api(served.url, 'POST', '/api/tasks', { title: 'q', card: card(), attach: false })).status).toBe(401);
    const queued = (await api(served.op, 'POST', '/api/tasks', { title: 'q', card: card(), attach: false })).json.id;
    const attached = (await api(served.op, 'POST', '/api/tasks', { title: 'a', card: card() })).json.id;
    const stream = await openStream(`${served.url}/api/tasks/${attached}/events`, served.op.headers);
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
