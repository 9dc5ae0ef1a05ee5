/**
 * taskloop's schema dropped under an open store (or a pooler that resets the session's
 * search path): every call is refused STORE_REPLACED, as on SQLite when the file is deleted
 * while open, and a daemon stops with it. It was the server's raw 42P01, which a daemon
 * logged and retried for ever.
 */
import { describe, expect, it } from 'vitest';
import { isEngineError } from '../../src/engine/index.js';
import { codeOf, freshManager, operator } from '../helpers.js';
import { daemonCard, startDaemonProcess } from '../workers/daemon-helpers.js';
import { sql } from './sql.js';

const dropSchema = async (url: string) => {
  const schema = new URL(url).searchParams.get('schema')!;
  await sql(url, `DROP SCHEMA ${schema} CASCADE`);
};

describe('the schema dropped under an open store', () => {
  it('every call is refused STORE_REPLACED, naming what to look at', async () => {
    const tm = freshManager();
    const { task } = await tm.createTask({ title: 'before' }, operator);
    await dropSchema(tm.path);
    for (const call of [
      () => tm.findTasks({}),
      () => tm.getTask(task.id),
      () => tm.createTask({ title: 'after' }, operator),
      () => tm.claimTask({ agent: 'alice' }),
      () => tm.stats(),
    ]) {
      const err = await call().then(() => undefined, (e: unknown) => e);
      expect(isEngineError(err) && err.code, String(err)).toBe('STORE_REPLACED');
      expect((err as Error).message).toMatch(/relation "\w+" does not exist \(taskloop's tables are not on this session's search path: was its schema dropped/);
    }
  });

  it('a daemon on it stops with STORE_REPLACED and exits 1', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'run first', card: daemonCard() }, operator);
    const daemon = await startDaemonProcess(tm.path, ['--workers', '2']);
    await daemon.waitForLine(/run \d+: completed/);
    await dropSchema(tm.path);
    expect(await codeOf(tm.createTask({ title: 'after', card: daemonCard() }, operator))).toBe('STORE_REPLACED');
    expect(await daemon.exited).toBe(1);
    expect(daemon.lines.filter((l) => /stopping: STORE_REPLACED/.test(l))).toHaveLength(1);
    expect(daemon.lines.at(-1)).toMatch(/^taskloop: STORE_REPLACED: .*relation "\w+" does not exist/);
    expect(daemon.lines.join('\n')).not.toMatch(/INTERNAL|\n\s+at /);
  });
});
