/**
 * A task's events read while another process appends them: every page task_get shows, and
 * every step of a reader following the task by cursor, is a gapless slice of the task's log.
 * On SQLite a task's events are two statements (its chain, its other events) and its row a
 * third: without one read transaction around them, an event committed between two showed
 * while an earlier one of the other kind did not (2,913 of 20,407 pages had a hole), and a
 * cursor past it never came back. On PostgreSQL ids are handed out before commit and a task's
 * breaker events commit beside its other events: the window now stops at the settled horizon
 * as readEvents does. Found by attacking task_get's pages (session 27).
 */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, agent, freshManager } from '../helpers.js';

const CHURN = join(ROOT, 'test/fixtures/task-churn.mjs');

describe('a task’s events under concurrent appends', () => {
  it('are read as gapless slices: task_get’s window and a cursor following the task', async () => {
    const tm = freshManager();
    const T = (await tm.createTask({ title: 'busy', maxAttempts: 100 }, agent('alice'))).task.id;
    const child = fork(CHURN, [tm.path, String(T), '2'], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += String(d)));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    let running = true;
    void exited.then(() => (running = false));

    const windows: number[][] = [];
    const followed: number[] = [];
    while (running) {
      windows.push((await tm.getTask(T, { events: { last: 12 } })).events.map((e) => e.id));
      const page = await tm.store.readEvents({ taskId: T, afterId: followed.at(-1) ?? 0, limit: 7 });
      followed.push(...page.map((e) => e.id));
      await new Promise((r) => setImmediate(r));
    }
    expect(await exited).toBe(0);
    expect(Number(out.trim())).toBeGreaterThan(0);
    for (;;) {
      const page = await tm.store.readEvents({ taskId: T, afterId: followed.at(-1) ?? 0, limit: 1000 });
      if (page.length === 0) break;
      followed.push(...page.map((e) => e.id));
    }

    const truth = (await tm.getTask(T)).events.map((e) => e.id);
    const at = new Map(truth.map((id, i) => [id, i]));
    const holed = windows.filter((w) => w.length > 0 && at.get(w.at(-1)!)! - at.get(w[0]!)! !== w.length - 1);
    expect(windows.length).toBeGreaterThan(50);
    expect(holed.slice(0, 3)).toEqual([]);
    expect(followed).toEqual(truth);
  });
});
