/**
 * Tasks not yet due, falling due together under two daemon processes: each claimed once, none
 * before its run_after, all run. A task not yet due waits outside the claimable ones until a
 * claim in its queue releases it (SQLite's migration 13, PostgreSQL's version 9; 500 at most
 * a claim), so here several releases race across processes and threads.
 */
import { describe, expect, it } from 'vitest';
import { freshManager, operator, waitFor } from '../helpers.js';
import { querySql } from '../stores.js';
import { daemonCard, startDaemonProcess } from './daemon-helpers.js';

describe('tasks falling due under two daemons', () => {
  it('1,200 falling due at once beside 100 due now: each run once, none claimed before its run_after', async () => {
    const tm = freshManager();
    const card = daemonCard({ allowed_tools: ['echo'], script: [{ action: 'tool', tool: 'echo', args: { text: 'hi' } }, { action: 'done' }] });
    const at = Date.now() + 4_000;
    for (let i = 0; i < 1200; i += 600) {
      await tm.createTasks(Array.from({ length: 600 }, (_, j) => ({ title: `at ${i + j}`, card, priority: (i + j) % 3, runAfter: at })), operator);
    }
    await tm.createTasks(Array.from({ length: 100 }, (_, j) => ({ title: `now ${j}`, card })), operator);
    const daemons = [await startDaemonProcess(tm.path, ['--workers', '2']), await startDaemonProcess(tm.path, ['--workers', '2'])];
    try {
      await waitFor(async () => (await tm.stats()).byState.completed === 1300, 120_000, 'all 1,300 tasks to complete');
      const [claims] = await querySql<{ n: number; d: number }>(tm, "SELECT count(*) AS n, count(DISTINCT task_id) AS d FROM task_events WHERE type = 'task.claimed'");
      expect({ n: Number(claims!.n), d: Number(claims!.d) }).toEqual({ n: 1300, d: 1300 });
      const [early] = await querySql<{ n: number }>(
        tm,
        "SELECT count(*) AS n FROM task_events e JOIN tasks t ON t.id = e.task_id WHERE e.type = 'task.claimed' AND e.created_at < t.run_after",
      );
      expect(Number(early!.n)).toBe(0);
      for (const d of daemons) expect(d.lines.filter((l) => /STORE_BUSY|failed|INTERNAL/.test(l))).toEqual([]);
    } finally {
      for (const d of daemons) d.child.kill('SIGTERM');
      for (const d of daemons) expect(await d.exited).toBe(0);
    }
  });
});
