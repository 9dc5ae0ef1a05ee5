import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { definePlugin, isEngineError, openStore } from '../../src/index.js';
import { ROOT, tempDir } from '../helpers.js';

/** Resolves the names through the package's own exports map, as a user's import does. */
function importNames(specifier: string): string[] {
  const res = spawnSync(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(specifier)}); console.log(JSON.stringify(Object.keys(m)))`], { cwd: ROOT, encoding: 'utf8' });
  if (res.status !== 0) throw new Error(res.stderr);
  return JSON.parse(res.stdout) as string[];
}

describe('the public API', () => {
  it('each subpath of the exports map loads and carries its names', () => {
    expect(importNames('taskloop')).toEqual(expect.arrayContaining([
      'openStore', 'createTaskManager', 'EngineError', 'ERROR_CODES', 'EVENT_TYPES', 'defineTool', 'definePlugin',
      'startDaemon', 'createWorker', 'runTaskLoop', 'createHttpServer', 'taskTools', 'ticketTools', 'builtInTools', 'taskEnforcer',
    ]));
    expect(importNames('taskloop/tools')).toEqual(expect.arrayContaining(['defineTool', 'taskTools', 'basicTools', 'desktopTools', 'toOpenAiFunction']));
    expect(importNames('taskloop/plugins')).toEqual(expect.arrayContaining(['definePlugin', 'HOOK_NAMES', 'taskEnforcer']));
    expect(importNames('taskloop/workers')).toEqual(expect.arrayContaining(['startDaemon', 'createWorker', 'runTaskLoop', 'createScriptedPlanner']));
    expect(importNames('taskloop/mcp')).toEqual(expect.arrayContaining(['createMcpServer', 'serveStdio']));
  });

  it('internal files are not reachable by path', () => {
    const res = spawnSync(process.execPath, ['--input-type=module', '-e', "await import('taskloop/dist/engine/sqlite/task-store.js')"], { cwd: ROOT, encoding: 'utf8' });
    expect(res.status).not.toBe(0);
    expect(res.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('the public declarations name nothing of the SQLite adapter', () => {
    const index = spawnSync('grep', ['-l', 'sqlite/', join(ROOT, 'dist/engine/index.d.ts'), join(ROOT, 'dist/index.d.ts')], { encoding: 'utf8' });
    // Only the faults helpers (no better-sqlite3 types) stay in the engine barrel.
    for (const file of index.stdout.split('\n').filter(Boolean)) {
      const text = spawnSync('grep', ['sqlite/', file], { encoding: 'utf8' }).stdout;
      expect(text.split('\n').filter(Boolean).every((l) => l.includes('sqlite/faults.js'))).toBe(true);
    }
  });
});

describe('openStore', () => {
  it('refuses a URL it cannot store at (VALIDATION_FAILED), and a server that is not there (STORE_UNAVAILABLE), without the password and without creating anything', async () => {
    const dir = tempDir();
    const before = readdirSync(process.cwd());
    for (const [url, code] of [
      ['postgres://app:hunter2@127.0.0.1:1/tasks', 'STORE_UNAVAILABLE'],
      ['file://app:hunter2@/tmp/x.db', 'VALIDATION_FAILED'],
      ['mysql://app:hunter2@db/tasks', 'VALIDATION_FAILED'],
    ]) {
      const err = await openStore({ path: url! }).then(() => undefined, (e: unknown) => e);
      expect(isEngineError(err) && err.code, url).toBe(code);
      expect((err as Error).message).not.toContain('hunter2');
    }
    expect(readdirSync(process.cwd())).toEqual(before);
    expect(existsSync(join(dir, 'postgres:'))).toBe(false);
  });

  it('refuses an empty path and an unknown durability', async () => {
    await expect(openStore({ path: '' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
    await expect(openStore({ path: join(tempDir(), 'a.db'), durability: 'fast' as 'full' })).rejects.toMatchObject({ code: 'VALIDATION_FAILED' });
  });

  it('readonly on a missing file creates nothing (STORE_NOT_FOUND)', async () => {
    const dir = tempDir();
    await expect(openStore({ path: join(dir, 'sub', 'none.db'), readonly: true })).rejects.toMatchObject({ code: 'STORE_NOT_FOUND' });
    expect(existsSync(join(dir, 'sub'))).toBe(false);
  });

  it('opens a file and hands out the ports', async () => {
    const store = await openStore({ path: join(tempDir(), 'tasks.db') });
    const { task } = await store.tm.createTask({ title: 'x' }, { id: 'operator', role: 'operator' });
    expect((await store.runs.runsOf(task.id))).toEqual([]);
    expect(await store.schedules.listSchedules()).toEqual([]);
    await store.close();
  });
});

describe('definePlugin', () => {
  it('checks the name and register where the plugin is written', () => {
    expect(() => definePlugin({ name: '', register: () => undefined })).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    expect(() => definePlugin({ name: 'has space', register: () => undefined })).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    expect(() => definePlugin({ name: 'ok', register: 'x' as unknown as () => void })).toThrow(expect.objectContaining({ code: 'VALIDATION_FAILED' }));
    const p = definePlugin({ name: 'guard', register: () => undefined });
    expect(Object.isFrozen(p)).toBe(true);
  });
});
