/**
 * The process's write lock between real threads: a thread that waits for it asynchronously
 * (its other runs go on meanwhile) must not end while it waits. Atomics.waitAsync alone
 * keeps no event loop alive, so a thread whose only work was that wait ended silently and
 * its write never happened (found by a probe whose threads claimed for themselves: exit 13).
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager, createWriteLock } from '../../src/engine/index.js';
import { releaseWriteLock, tryWriteLock } from '../../src/engine/sqlite/write-lock.js';
import { ROOT, tempDir } from '../helpers.js';

const THREAD = `
const { workerData, parentPort } = require('node:worker_threads');
parentPort.once('message', async () => {
  const { createSqliteStore, createTaskManager } = await import(workerData.engine);
  const tm = createTaskManager({ store: createSqliteStore({ path: workerData.path, writeLock: workerData.lock, checkpoints: 'inline' }) });
  parentPort.postMessage('opened');
  parentPort.once('message', async () => {
    // The lock is held by the main thread now: this write waits for it, and nothing else
    // keeps the thread alive (the port no longer does).
    parentPort.unref();
    const { task } = await tm.createTask({ title: 'from the thread' }, { id: 'operator', role: 'operator' });
    await tm.close();
    parentPort.postMessage({ created: task.id });
  });
});
`;

describe('the write lock of a process', () => {
  it('a thread waiting for it asynchronously stays alive and writes once the lock is free', async () => {
    const path = join(tempDir(), 'lock.db');
    const lock = createWriteLock();
    const tm = createTaskManager({ store: createSqliteStore({ path, writeLock: lock }) });
    const engine = pathToFileURL(join(ROOT, 'dist/engine/index.js')).href;
    const worker = new Worker(THREAD, { eval: true, workerData: { engine, path, lock } });
    const messages: unknown[] = [];
    const exited = new Promise<number>((resolve) => worker.on('exit', resolve));
    const next = () => new Promise<unknown>((resolve) => worker.once('message', (m) => resolve(m)));
    try {
      let reply = next();
      worker.postMessage('open');
      messages.push(await reply);
      expect(tryWriteLock(lock)).toBe(true);
      reply = next();
      worker.postMessage('write');
      await new Promise((r) => setTimeout(r, 300));
      releaseWriteLock(lock);
      messages.push(await Promise.race([reply, exited.then((code) => `exited ${code} before writing`)]));
      expect(messages).toEqual(['opened', { created: 1 }]);
      expect((await tm.getTask(1)).title).toBe('from the thread');
      expect(await exited).toBe(0);
    } finally {
      await worker.terminate();
      await tm.close();
    }
  });
});
