/**
 * One checkpointer per process: stores that share a write lock count their commits for the
 * one that runs it (three checkpointers of one file in a daemon took more CPU than its runs).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager, createWriteLock } from '../../src/engine/index.js';
import { operator, tempDir } from '../helpers.js';

describe('the checkpointer of a process', () => {
  it('is started once for all the stores sharing a write lock, and hears the commits of each', async () => {
    const path = join(tempDir(), 'ck.db');
    const lock = createWriteLock();
    const main = createTaskManager({ store: createSqliteStore({ path, writeLock: lock }) });
    const thread = createTaskManager({ store: createSqliteStore({ path, writeLock: lock, checkpoints: 'inline' }) });
    const other = createTaskManager({ store: createSqliteStore({ path, writeLock: lock }) });
    try {
      for (let i = 0; i < 150; i++) {
        await thread.createTask({ title: `t${i}` }, operator);
        await other.createTask({ title: `o${i}` }, operator);
      }
      expect(Atomics.load(lock, 3)).toBe(300);
      // 300 commits were counted by the lock: the first background store to commit after the
      // threshold took the checkpointer (cell 2); no other store may start one.
      await main.createTask({ title: 'main' }, operator);
      expect(Atomics.load(lock, 2)).toBe(1);
      expect(Atomics.compareExchange(lock, 2, 0, 1)).toBe(1);
    } finally {
      await thread.close();
      await other.close();
      await main.close();
    }
  });
});
