/**
 * Many machines on one PostgreSQL server, simulated: daemon processes that present different
 * hosts (TASKLOOP_HOST; distinct host identities rather than network namespaces, so the
 * server stays on loopback for the test). A pid means nothing across hosts, so a killed
 * daemon is found by its silence, in the database's clock.
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { TaskManager as Manager } from '../../src/engine/index.js';

type TaskManager = Manager & { path: string };
import { freshManager, operator, tempDir, waitFor } from '../helpers.js';
import { portsOf } from '../stores.js';
import { sql } from './sql.js';
import { type DaemonProcess, daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';


const onHost = (tm: TaskManager, host: string, args: string[] = []): Promise<DaemonProcess> =>
  startDaemonProcess(tm.path, ['--workers', '2', ...args], { ...process.env, TASKLOOP_HOST: host });

async function completedCount(tm: Manager): Promise<number> {
  return (await tm.stats()).byState.completed;
}

describe('daemons on several hosts, one PostgreSQL server', () => {
  it('4 daemons x 2 threads on 4 hosts drain 5,000 tasks: each completed exactly once, every host takes a share', async () => {
    const tm = freshManager();
    for (let i = 0; i < 5000; i += 500) {
      await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `t${i + j}`, card: daemonCard() })), operator);
    }
    const daemons = await Promise.all(['host-a', 'host-b', 'host-c', 'host-d'].map((h) => onHost(tm, h, ['--concurrency', '8'])));
    expect(new Set((await portsOf(tm).runs.daemons()).map((d) => d.host))).toEqual(new Set(['host-a', 'host-b', 'host-c', 'host-d']));
    const started = Date.now();
    await waitFor(async () => (await completedCount(tm)) === 5000, 280_000, '5,000 tasks completed');
    console.log(`4 hosts drained 5,000 one-tool tasks in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    const perTask = await sql<{ n: number }>(
      tm.path,
      `SELECT count(*) FILTER (WHERE type = 'task.transitioned' AND data::jsonb->>'to' = 'completed')::int AS n
       FROM task_events WHERE task_id IS NOT NULL GROUP BY task_id`,
    );
    expect(perTask).toHaveLength(5000);
    expect(perTask.every((r) => r.n === 1)).toBe(true);
    const runsPerTask = await sql<{ n: number }>(tm.path, 'SELECT count(*)::int AS n FROM runs GROUP BY task_id');
    expect(runsPerTask.every((r) => r.n === 1)).toBe(true);
    // Each daemon claims as its own agent: all four did part of the work.
    const byAgent = await sql<{ actor: string; n: number }>(tm.path, "SELECT actor, count(*)::int AS n FROM task_events WHERE type = 'task.claimed' GROUP BY actor");
    expect(byAgent).toHaveLength(4);
    for (const a of byAgent) expect(a.n).toBeGreaterThan(0);
    for (const d of daemons) d.child.kill('SIGTERM');
    expect(await Promise.all(daemons.map((d) => d.exited))).toEqual([0, 0, 0, 0]);
  }, 300_000);

  it('kill -9 of a daemon mid-run: its runs resume on another host within seconds, and no write runs twice', async () => {
    const tm = freshManager();
    const file = join(tempDir(), 'writes.log');
    appendFileSync(file, '');
    const card = (i: number) =>
      daemonCard({
        allowed_tools: ['wait', 'log_append'],
        scope: {},
        script: [
          { action: 'tool', tool: 'wait', args: { ms: 8000 } },
          { action: 'tool', tool: 'log_append', args: { file, line: `task-${i}` } },
          { action: 'done' },
        ],
      });
    const created = await tm.createTasks(Array.from({ length: 40 }, (_, i) => ({ title: `k${i}`, card: card(i) })), operator);
    const ids = created.map((c) => c.task.id);
    const victim = await onHost(tm, 'host-victim', ['--concurrency', '40']);
    // The victim holds every task (its waits all in flight) before the peers start. A wait's
    // begin reaches the store with its run's first flush (journal.ts), not before the call:
    // long waits, so that on a loaded machine the 40th is written before the first is over.
    await waitFor(async () => (await sql<{ n: number }>(tm.path, "SELECT count(*)::int AS n FROM steps WHERE tool = 'wait' AND status = 'started'"))[0]!.n === 40, 30_000, '40 waits in flight');
    expect(await sql(tm.path, "SELECT 1 FROM steps WHERE tool = 'log_append'")).toEqual([]); // none past its wait
    // Killed before the peers start: on a loaded machine three daemons can take longer to
    // start than the victim's waits last, and a victim that finished its runs leaves nothing
    // to resume (seen once in a full run). The peers find it silent at their first checks.
    victim.child.kill('SIGKILL');
    await victim.exited;
    const killedAt = Date.now();
    const peers = await Promise.all(['host-b', 'host-c', 'host-d'].map((h) => onHost(tm, h)));
    // Found by silence (the default --dead-after of 4 s), not by a lease: the runs resume before
    // the victim's 30 s leases could have run out. (How soon is bench:pg's recovery figure;
    // a loaded machine must not fail this test on time alone.)
    const lines = () => peers.flatMap((p, i) => p.lines.map((l) => `peer ${i}: ${l}`)).join('\n');
    await waitFor(async () => (await sql(tm.path, "SELECT 1 FROM task_events WHERE type = 'run.resumed'")).length > 0, 60_000, `a run resumed on another host\n${lines()}`);
    const resumedAfter = Date.now() - killedAt;
    expect(resumedAfter).toBeLessThan(30_000);
    const reclaims = await sql<{ data: string }>(tm.path, "SELECT data FROM task_events WHERE data LIKE '%sent no heartbeat%' LIMIT 1");
    expect(reclaims).toHaveLength(1); // reclaimed for its silence, not for an expired lease
    await waitFor(async () => (await completedCount(tm)) === 40, 60_000, 'all 40 completed');
    expect(readFileSync(file, 'utf8').trim().split('\n').sort()).toEqual(ids.map((_, i) => `task-${i}`).sort());
    const runs = await sql<{ n: number }>(tm.path, 'SELECT count(*)::int AS n FROM runs GROUP BY task_id');
    expect(runs.every((r) => r.n === 1)).toBe(true); // resumed, not started again
    expect(peers.some((p) => p.lines.some((l) => /reclaimed tasks .* from a daemon that is gone/.test(l)))).toBe(true);
    expect((await portsOf(tm).runs.daemons()).map((d) => d.host).sort()).toEqual(['host-b', 'host-c', 'host-d']);
    for (const p of peers) p.child.kill('SIGTERM');
    expect(await Promise.all(peers.map((p) => p.exited))).toEqual([0, 0, 0]);
  }, 180_000); // 40 runs of an 8 s wait, a 4 s silence and the resumed runs, on a loaded machine
});
