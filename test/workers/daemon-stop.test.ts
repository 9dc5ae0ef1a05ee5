/**
 * What a daemon's stop leaves behind when its grace runs out with a run still busy: the
 * run's lease is let go (expired now), so another daemon takes the task over at once. Its
 * heartbeat must not renew that lease on the way out.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteRunStore, type SqliteTaskStore } from '../../src/engine/index.js';
import { startDaemon } from '../../src/workers/daemon.js';
import { ROOT, freshManager, operator, waitFor } from '../helpers.js';
import { daemonCard } from './daemon-helpers.js';

describe('a daemon that stops with a run still busy', () => {
  it('leaves its lease expired: no heartbeat renews it between the let-go and the end (6 rounds, beats every 33 ms)', async () => {
    const tm = freshManager();
    for (let round = 0; round < 6; round++) {
      const marker = join(tm.path, '..', `blocking-${round}`);
      const { task } = await tm.createTask({ title: `busy ${round}`, card: daemonCard({ allowed_tools: ['block'], script: [{ action: 'tool', tool: 'block', args: { ms: 400, marker } }, { action: 'done' }] }) }, operator);
      // A lease of 100 ms (the least): the holder beats every 33 ms, so a beat lands in any window of the stop.
      const d = await startDaemon({ dbPath: tm.path, workers: 1, concurrency: 1, leaseMs: 100, toolModules: [join(ROOT, 'test/fixtures/test-tools.mjs')], log: () => undefined });
      // Busy in a tool that blocks its thread: the drain cannot reach it within the grace.
      await waitFor(() => existsSync(marker), 10_000, 'the run to block');
      await d.stop(50);
      const after = await tm.getTask(task.id);
      const now = await tm.store.clock();
      expect(after.leaseExpiresAt, `round ${round}`).not.toBeNull();
      expect(after.leaseExpiresAt!, `round ${round}: the lease was renewed after the let-go`).toBeLessThanOrEqual(now);
      // Taken over at once: the sweep returns it (no wait for a lease).
      const swept = await tm.sweep({ graceMs: 0 });
      expect([...swept.requeued, ...swept.failed], `round ${round}`).toContain(task.id);
      await tm.cancelTask({ taskId: task.id, actor: operator });
    }
    await tm.close();
  });
});

describe('a daemon whose modules cannot load', () => {
  it('startDaemon rejects with the module’s one-line error before it registers or starts a thread', async () => {
    const tm = freshManager();
    await expect(startDaemon({ dbPath: tm.path, workers: 1, plugins: [{ module: join(ROOT, 'test/fixtures/silent-plugin.mjs') }], log: () => undefined })).rejects.toThrow(
      /^plugin silent registered no hooks/,
    );
    await expect(startDaemon({ dbPath: tm.path, workers: 1, toolModules: [join(tm.path, '..', 'nope.mjs')], log: () => undefined })).rejects.toThrow(/^tool module .*nope\.mjs failed to load/);
    expect(await createSqliteRunStore(tm.store as SqliteTaskStore).daemons()).toEqual([]);
    await tm.close();
  });
});
