/**
 * A real full disk: a 2 MiB tmpfs mounted by the test (as root), the database on it, and a
 * filler file that takes the rest. Nothing is mocked: SQLite meets ENOSPC from the kernel.
 */
import { existsSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager, isEngineError } from '../../src/engine/index.js';
import { cli } from '../cli/helpers.js';
import { operator, waitFor } from '../helpers.js';
import { api, startServer } from '../monitor/http-helpers.js';
import { daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';
import { fill, freeBytes, mountTmpfs } from './tmpfs.js';

const walSize = (db: string) => (existsSync(`${db}-wal`) ? statSync(`${db}-wal`).size : 0);

describe('a full disk', () => {
  it('a write fails STORE_FULL whole, reads go on, and once space is freed the WAL is cut to nothing and writes work again without a restart', async () => {
    const dir = mountTmpfs('2m');
    const db = join(dir, 'tasks.db');
    const tm = createTaskManager({ store: createSqliteStore({ path: db }) });
    try {
      await tm.createTasks(Array.from({ length: 20 }, (_, i) => ({ title: `before ${i}` })), operator);
      fill(join(dir, 'filler'));
      expect(freeBytes(dir)).toBe(0);

      // Batches of five: a batch is one transaction, so the count moves by five or not at all.
      let written = 0;
      const batch = () => tm.createTasks(Array.from({ length: 5 }, (_, i) => ({ title: `${'x'.repeat(300)} ${written}.${i}` })), operator);
      let err: unknown;
      for (let i = 0; i < 10_000 && err === undefined; i++) {
        await batch().then(() => void written++, (e: unknown) => void (err = e));
      }
      expect(isEngineError(err), `a write that met the full disk fails with an engine error, not ${String(err)}`).toBe(true);
      if (!isEngineError(err)) return;
      expect(err.code).toBe('STORE_FULL');
      expect(err.message).toContain(db);
      expect(err.data).toMatchObject({ path: db, sqlite_code: 'SQLITE_FULL' });

      // A claim in a transaction that failed claimed nothing: the task stays pending.
      const claim = await tm.claimTask({ agent: 'worker' }).then(() => undefined, (e: unknown) => e);
      expect(isEngineError(claim) && claim.code).toBe('STORE_FULL');
      // Nothing half-written, and reads still work on the full disk.
      const stats = await tm.stats();
      expect(stats.byState.pending).toBe(20 + 5 * written);
      expect(stats.byState.claimed + stats.byState.in_progress).toBe(0);
      expect(stats.lastEventId).toBe(20 + 5 * written);
      expect((await tm.findTasks({ limit: 1000 })).length).toBe(20 + 5 * written);

      rmSync(join(dir, 'filler'));
      // The store's retried TRUNCATE checkpoint cuts the -wal to nothing: the freed space stays free.
      await waitFor(() => walSize(db) === 0, 10_000, 'the -wal to be truncated');
      const { task } = await tm.createTask({ title: 'after the disk was freed' }, operator);
      expect((await tm.getTask(task.id)).title).toBe('after the disk was freed');
      expect((await tm.stats()).byState.pending).toBe(21 + 5 * written);
      // Near full, the store keeps its log short instead of letting it grow to 16 MiB.
      await tm.createTasks(Array.from({ length: 200 }, (_, i) => ({ title: `later ${i}` })), operator);
      for (let i = 0; i < 100; i++) await tm.createTask({ title: `one by one ${i}` }, operator);
      expect(walSize(db)).toBeLessThan(256 * 1024);
    } finally {
      await tm.close();
    }
  });

  it('the CLI prints one STORE_FULL line and exits 1; HTTP answers 503 STORE_FULL; both work again once space is freed', async () => {
    const dir = mountTmpfs('2m');
    const db = join(dir, 'tasks.db');
    const server = await startServer({ path: db });
    expect((await api(server.op, 'POST', '/api/tasks', { title: 'fits', attach: false })).status).toBe(201);
    server.db.pragma('wal_checkpoint(TRUNCATE)'); // the filler then takes every free byte
    fill(join(dir, 'filler'));

    const r = await cli(db, 'task', 'create', '--title', 'no room');
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^taskloop: STORE_FULL: create on ${db}: the disk is full`));

    const refused = await api(server.op, 'POST', '/api/tasks', { title: 'no room either', attach: false });
    expect(refused.status).toBe(503);
    expect(refused.json.error.code).toBe('STORE_FULL');

    rmSync(join(dir, 'filler'));
    expect((await cli(db, 'task', 'create', '--title', 'room again')).code).toBe(0);
    expect((await api(server.op, 'POST', '/api/tasks', { title: 'room again too', attach: false })).status).toBe(201);
    expect((await server.tm.findTasks({})).map((t) => t.title).sort()).toEqual(['fits', 'room again', 'room again too']);
  });

  it('a daemon on a disk that fills up finishes every task once space is freed; a run cut short is given back at once', async () => {
    const dir = mountTmpfs('2m');
    const db = join(dir, 'tasks.db');
    const tm = createTaskManager({ store: createSqliteStore({ path: db }) });
    // The default 30 s lease: finishing well within it shows no task waited its lease out.
    const daemon = await startDaemonProcess(db);
    const N = 60;
    // A step that waits, so that runs are in flight when the disk fills.
    const card = daemonCard({
      allowed_tools: ['noop', 'wait'],
      script: [{ action: 'tool', tool: 'noop' }, { action: 'tool', tool: 'wait', args: { ms: 100 } }, { action: 'tool', tool: 'noop' }, { action: 'done' }],
    });
    for (let i = 0; i < N; i++) await tm.createTask({ title: `t${i}`, card }, operator);
    await waitFor(async () => (await tm.stats()).byState.in_progress > 0, 20_000, 'a run in flight');
    fill(join(dir, 'filler'));
    await daemon.waitForLine(/STORE_FULL/);
    // A while on the full disk: the daemon keeps failing and retrying, and stays up.
    const failedAt = Date.now();
    await waitFor(() => Date.now() - failedAt > 1500, 5000, 'time on the full disk');
    expect(daemon.child.exitCode).toBeNull();
    const done = (await tm.stats()).byState.completed;
    expect(done).toBeLessThan(N);

    rmSync(join(dir, 'filler'));
    const freedAt = Date.now();
    await waitFor(async () => (await tm.stats()).byState.completed === N, 30_000, `all ${N} tasks to complete`);
    const seconds = (Date.now() - freedAt) / 1000;
    const cut = daemon.lines.filter((l) => /run cut short: STORE_FULL/.test(l)).length;
    console.log(`disk freed: the ${N - done} tasks left completed in ${seconds.toFixed(1)} s (${cut} runs had been cut short)`);
    expect(cut, 'a run in flight met the full disk').toBeGreaterThan(0);
    expect(seconds).toBeLessThan(15);
    // No task waited out a lease: none was reclaimed into a second run's failure.
    expect((await tm.stats()).byState.failed).toBe(0);
    expect(daemon.lines.filter((l) => /STORE_FULL/.test(l)).every((l) => l.includes(db))).toBe(true);
    expect(daemon.lines.join('\n')).not.toMatch(/\[object Object\]|INTERNAL|SqliteError/);
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
    await tm.close();
  });
});
