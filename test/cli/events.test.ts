import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, freshManager, operator, waitFor } from '../helpers.js';

const bin = join(ROOT, 'bin/taskloop');

describe('taskloop events', () => {
  it('--follow keeps following: it prints what another process commits later, and exits 0 on SIGTERM', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'before' }, operator);
    const child = spawn(process.execPath, [bin, '--db', tm.path, 'events', '--follow'], { stdio: ['ignore', 'pipe', 'pipe'] });
    onTestFinished(() => void child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const created = () => out.split('\n').filter((l) => l.includes('task.created')).length;
    await waitFor(() => created() === 1, 10_000, 'the existing event');
    // Well past the 0.4 s after which it used to exit on its own.
    await new Promise((r) => setTimeout(r, 800));
    expect(child.exitCode).toBeNull();
    await tm.createTask({ title: 'after' }, operator);
    await waitFor(() => created() === 2, 10_000, 'the new event, printed live');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });

  it('a reader that goes away (events | head -1) ends it quietly: no stack trace, exit 0', async () => {
    const tm = freshManager();
    for (let b = 0; b < 2; b++) await tm.createTasks(Array.from({ length: 1000 }, (_, i) => ({ title: `t${b}-${i}` })), operator);
    const child = spawn('sh', ['-c', `"${process.execPath}" "${bin}" --db "${tm.path}" events | head -1 > /dev/null`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(err).toBe('');
  });
});
