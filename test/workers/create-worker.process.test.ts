import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { onTestFinished, describe, expect, it } from 'vitest';
import { OPERATOR, openStore } from '../../src/index.js';
import { ROOT, tempDir } from '../helpers.js';

const FIXTURE = join(ROOT, 'test/fixtures/handler-worker.mjs');

/** A worker process; `lines` collects its stdout, `waitFor` resolves on a line matching. */
function spawnWorker(db: string, agent: string, mode: 'hang' | 'work', concurrency: number) {
  const child: ChildProcess = spawn(process.execPath, [FIXTURE, db, agent, mode, String(concurrency)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    lines.push(...chunk.split('\n').filter(Boolean));
    for (const w of [...watchers]) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const waitFor = (count: number, prefix: string, ms = 20_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (lines.filter((l) => l.startsWith(prefix)).length >= count) {
          watchers.delete(check);
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(() => reject(new Error(`${agent}: no ${count} "${prefix}" lines within ${ms} ms; stdout ${lines.join(' | ')}; stderr ${stderr}`)), ms);
      watchers.add(check);
      check();
    });
  return { child, lines, exited, waitFor };
}

describe('createWorker across processes', () => {
  it('a worker killed with SIGKILL mid-handler has its tasks taken by a peer within a second, each completed once', async () => {
    const db = join(tempDir(), 'tasks.db');
    const store = await openStore({ path: db });
    onTestFinished(() => store.close());
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await store.tm.createTask({ title: `job ${i}`, queue: 'crash', maxAttempts: 3 }, OPERATOR)).task.id);

    const a = spawnWorker(db, 'worker-a', 'hang', 3);
    await a.waitFor(3, 'started ');
    const b = spawnWorker(db, 'worker-b', 'work', 2);
    await b.waitFor(1, 'ready ');
    const cursor = (await store.tm.stats()).lastEventId;
    const killedAt = Date.now();
    a.child.kill('SIGKILL');
    await a.exited;

    const deadline = Date.now() + 15_000;
    for (;;) {
      const states = await Promise.all(ids.map(async (id) => (await store.tm.getTask(id)).state));
      if (states.every((s) => s === 'completed')) break;
      if (Date.now() > deadline) throw new Error(`tasks still ${states.join(', ')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const events = (await store.tm.store.readEvents({ afterId: cursor, limit: 1000 }));
    for (const id of ids) {
      const mine = events.filter((e) => e.taskId === id);
      const reclaimed = mine.find((e) => e.type === 'task.stale_reclaimed');
      expect(reclaimed?.data).toMatchObject({ previous_assignee: 'worker-a' });
      const claimedByB = mine.find((e) => e.type === 'task.claimed' && e.actor === 'worker-b');
      expect(claimedByB).toBeDefined();
      // Recovery is the dead-peer check (every 250 ms), not the 30 s lease.
      expect(claimedByB!.createdAt - killedAt).toBeLessThan(1000);
      const completions = (await store.tm.getTask(id)).events.filter((e) => e.data.to === 'completed');
      expect(completions).toHaveLength(1);
      const task = await store.tm.getTask(id);
      expect(task.result).toEqual({ by: 'worker-b' });
      expect(task.attempts).toBe(2);
    }
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    // Both left the registry: A's row was removed by B's reclaim, B's by its close.
    expect(await store.runs.daemons()).toEqual([]);
  });
});
