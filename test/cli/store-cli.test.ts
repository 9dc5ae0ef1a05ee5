/**
 * The CLI's side of the store's faults: one line and exit 1 for each, read-only commands that
 * create nothing and work for a user who may only read, the daemon's option checks, backups.
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { ROOT, operator, tempDir } from '../helpers.js';
import { TEST_TOOLS, startDaemonProcess } from '../workers/daemon-helpers.js';
import { type CliResult, cli, cliJson, spawnCli } from './helpers.js';
import { MIGRATIONS } from '../../src/engine/sqlite/migrations.js';

const digest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');
const RUNUSER = '/usr/sbin/runuser';

/** The real bin/taskloop as the user `nobody` (needs root, as CI runs, and util-linux's runuser). */
function asNobody(args: string[]): Promise<CliResult> {
  if (process.getuid?.() !== 0 || !existsSync(RUNUSER)) {
    throw new Error('this test runs the CLI as the user nobody, which needs root and runuser (CI runs as root): run it as root');
  }
  return new Promise((resolve) => {
    execFile(RUNUSER, ['-u', 'nobody', '--', process.execPath, join(ROOT, 'bin/taskloop'), ...args], (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout: stdout.trim(), stderr: stderr.trim() });
    });
  });
}

/** A database with these tasks, closed, in a folder of its own. */
async function seeded(path: string, titles: string[]): Promise<void> {
  const tm = createTaskManager({ store: createSqliteStore({ path }) });
  await tm.createTasks(titles.map((title) => ({ title })), operator);
  await tm.close();
}

/** No daemon was registered and the one seeded task is still pending. */
async function expectNothingStarted(path: string): Promise<void> {
  const store = createSqliteStore({ path, readonly: true });
  try {
    expect(store.db.prepare('SELECT count(*) FROM daemons').pluck().get()).toBe(0);
    expect(store.db.prepare('SELECT state FROM tasks').pluck().all()).toEqual(['pending']);
  } finally {
    await store.close();
  }
}

const oneLine = (r: CliResult, re: RegExp) => {
  expect(r.code, r.stderr).toBe(1);
  expect(r.stderr.split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(re);
};

describe('the CLI and the store’s faults', () => {
  it('a file from a newer schema: one STORE_TOO_NEW line, exit 1, for a write and for a read; the file is unchanged', async () => {
    const path = join(tempDir(), 'newer.db');
    await seeded(path, ['kept']);
    const store = createSqliteStore({ path });
    store.db.pragma('user_version = 99');
    await store.close();
    const before = digest(path);
    oneLine(await cli(path, 'task', 'create', '--title', 'x'), new RegExp(`^taskloop: STORE_TOO_NEW: open on ${path}: the file's schema is version 99, newer than version \\d+`));
    oneLine(await cli(path, 'task', 'list'), /^taskloop: STORE_TOO_NEW: /);
    oneLine(await spawnCli(['--db', path, 'daemon', '--tools', TEST_TOOLS]), /^taskloop: STORE_TOO_NEW: /);
    expect(digest(path)).toBe(before);
  });

  it('a command that only reads, on a path with no database, is STORE_NOT_FOUND and creates nothing', async () => {
    const dir = tempDir();
    const path = join(dir, 'nowhere', 'tasks.db');
    for (const args of [['task', 'list'], ['task', 'show', '1'], ['events'], ['stats'], ['approvals', 'list'], ['schedule', 'list']]) {
      oneLine(await cli(path, ...args), new RegExp(`^taskloop: STORE_NOT_FOUND: open on ${path}: no database there`));
    }
    expect(readdirSync(dir)).toEqual([]);
  });

  it('reads work on a read-only file: chmod 0444, and as a user who may only read, with and without a live writer', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    await seeded(path, ['visible']);
    chmodSync(path, 0o444);
    const before = digest(path);
    const list = await cli(path, '--json', 'task', 'list');
    expect(list.code, list.stderr).toBe(0);
    expect((JSON.parse(list.stdout) as Array<{ title: string }>).map((t) => t.title)).toEqual(['visible']);
    expect(digest(path)).toBe(before);

    // A copy in a folder that nobody may read but not write, the file theirs to read only.
    chmodSync(dir, 0o755);
    const shared = join(dir, 'shared');
    mkdirSync(shared, { mode: 0o755 });
    const copy = join(shared, 'tasks.db');
    copyFileSync(path, copy);
    chmodSync(copy, 0o644);
    const copied = digest(copy);
    const asThem = await asNobody(['--db', copy, '--json', 'task', 'list']);
    expect(asThem.code, asThem.stderr).toBe(0);
    expect((JSON.parse(asThem.stdout) as Array<{ title: string }>).map((t) => t.title)).toEqual(['visible']);
    expect((await asNobody(['--db', copy, 'task', 'show', '1'])).stdout).toContain('visible');
    expect((await asNobody(['--db', copy, 'events'])).stdout).toContain('task.created');
    expect((await asNobody(['--db', copy, 'stats'])).stdout).toMatch(/^pending\s+1$/m);
    expect((await asNobody(['--db', copy, 'tickets', 'list'])).code).toBe(0);
    oneLine(await asNobody(['--db', copy, 'task', 'create', '--title', 'theirs']), new RegExp(`^taskloop: STORE_READONLY: open on ${copy}: the file cannot be written`));
    expect(readdirSync(shared)).toEqual(['tasks.db']);
    expect(digest(copy)).toBe(copied);

    // With a writer holding the file open (its -wal and -shm there, readable by them too),
    // they read what it committed last.
    const writer = createTaskManager({ store: createSqliteStore({ path: copy }) });
    try {
      await writer.createTask({ title: 'committed by the writer' }, operator);
      const live = await asNobody(['--db', copy, '--json', 'task', 'list']);
      expect(live.code, live.stderr).toBe(0);
      expect((JSON.parse(live.stdout) as Array<{ title: string }>).map((t) => t.title)).toEqual(['visible', 'committed by the writer']);
    } finally {
      await writer.close();
    }
  });

  it('daemon --workers 0 is a usage error (exit 2) that leaves no daemon row and creates no file', async () => {
    const dir = tempDir();
    const fresh = join(dir, 'fresh.db');
    const r = await spawnCli(['--db', fresh, 'daemon', '--workers', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^taskloop: --workers: 0 is not a whole number from 1 to 256$/);
    expect(existsSync(fresh)).toBe(false);

    const path = join(dir, 'tasks.db');
    await seeded(path, ['a']);
    for (const bad of [['--workers', '0'], ['--workers', 'two'], ['--lease', '0s'], ['--sweep', 'not cron']]) {
      const refused = await spawnCli(['--db', path, 'daemon', '--tools', TEST_TOOLS, ...bad]);
      expect(refused.code, `${bad.join(' ')}: ${refused.stderr}`).toBe(2);
    }
    // A daemon may not claim as the operator or a system actor, nor under a look-alike name.
    for (const name of ['operator', 'Sweeper', 'operator\u200b']) {
      const refused = await spawnCli(['--db', path, 'daemon', '--agent', name]);
      expect(refused.code, `--agent ${JSON.stringify(name)}: ${refused.stderr}`).not.toBe(0);
      expect(refused.stderr).toMatch(/^taskloop: (RESERVED_NAME|--agent: ).*/);
    }
    const store = createSqliteStore({ path, readonly: true });
    try {
      expect(store.db.prepare('SELECT count(*) FROM daemons').pluck().get()).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('daemon and serve refuse a --tools or --plugin that cannot load before anything starts: exit 2, one line, no daemon row, nothing claimed', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    await seeded(path, ['a']);
    const silent = join(ROOT, 'test/fixtures/silent-plugin.mjs');
    const module = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const cases: Array<[string[], RegExp]> = [
      [['daemon', '--plugin', join(dir, 'missing.mjs')], /^taskloop: plugin module .*missing\.mjs failed to load: Cannot find module/],
      [['daemon', '--tools', join(dir, 'nope.mjs')], /^taskloop: tool module .*nope\.mjs failed to load: Cannot find module/],
      [['daemon', '--plugin', silent], /^taskloop: plugin silent registered no hooks/],
      [['daemon', '--tools', TEST_TOOLS, '--tools', TEST_TOOLS], /^taskloop: .*registered twice/],
      [['serve', '--port', '0', '--tools', join(dir, 'nope.mjs')], /^taskloop: tool module .*nope\.mjs failed to load/],
      [['serve', '--port', '0', '--plugin', silent, '--no-mcp'], /^taskloop: plugin silent registered no hooks/],
      // Loads in a main thread but not in the daemon's worker threads.
      [['daemon', '--tools', module('main-only.mjs', 'process.chdir(process.cwd());\nexport const tools = [];\n')], /^taskloop: tool module .*main-only\.mjs failed to load: process\.chdir\(\) is not supported in workers/],
      // Never finishes loading: once, this exited 0 saying nothing.
      [['daemon', '--tools', module('never.mjs', 'await new Promise(() => {});\nexport const tools = [];\n')], /^taskloop: the modules \(.*never\.mjs, task_enforcer\) never finished loading/],
    ];
    for (const [args, message] of cases) {
      const refused = await spawnCli(['--db', path, ...args]);
      expect(refused.code, `${args.join(' ')}: ${refused.stderr}`).toBe(2);
      expect(refused.stderr.split('\n'), args.join(' ')).toHaveLength(1);
      expect(refused.stderr).toMatch(message);
    }
    await expectNothingStarted(path);
  });

  it('SIGTERM while a slow --tools module loads stops the daemon at once: exit 0, nothing registered or claimed', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    await seeded(path, ['a']);
    const began = join(dir, 'began');
    // Loads for two minutes (an import that waits on a network, say): past the check's own
    // 60 s limit, so the daemon stopped only by that limit exits 2, not 0.
    writeFileSync(join(dir, 'slow.mjs'), `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(began)}, '');\nawait new Promise((r) => setTimeout(r, 120_000));\nexport const tools = [];\n`);
    const child = spawn(process.execPath, [join(ROOT, 'bin/taskloop'), '--db', path, 'daemon', '--tools', join(dir, 'slow.mjs')], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    while (!existsSync(began)) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGTERM');
    expect(await exited, stderr).toBe(0);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr.trim()).toMatch(/^\S+ SIGTERM: stopped while the modules were loading; the daemon did not start$/);
    await expectNothingStarted(path);
  });

  it('a tools module or plugin that leaves a timer running does not keep a stopped daemon alive (its modules load only in threads)', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    await seeded(path, ['a']);
    const loads = join(dir, 'loads.log');
    const record = `import { appendFileSync } from 'node:fs';\nimport { isMainThread } from 'node:worker_threads';\nconst note = (what) => appendFileSync(${JSON.stringify(loads)}, what + ' main=' + isMainThread + '\\n');\n`;
    writeFileSync(join(dir, 'timer-tools.mjs'), `${record}note('tools');\nsetInterval(() => {}, 60_000);\nexport const tools = [];\n`);
    writeFileSync(join(dir, 'timer-plugin.mjs'), `${record}export const plugin = { name: 'flusher', register(api) { note('plugin'); setInterval(() => {}, 60_000); api.on('tool_after', () => {}); } };\n`);
    const d = await startDaemonProcess(path, ['--workers', '1', '--tools', join(dir, 'timer-tools.mjs'), '--plugin', join(dir, 'timer-plugin.mjs')]);
    d.child.kill('SIGTERM');
    expect(await d.exited).toBe(0);
    // The check's throwaway thread, then the one worker thread: never the main thread.
    expect(readFileSync(loads, 'utf8').trim().split('\n').sort()).toEqual(['plugin main=false', 'plugin main=false', 'tools main=false', 'tools main=false']);
  });

  it('taskloop backup writes a copy of a live database that opens with the same tasks, and never overwrites a file', async () => {
    const dir = tempDir();
    const path = join(dir, 'tasks.db');
    const backup = join(dir, 'backup.db');
    // A live writer: its last commits are only in the -wal, which a copy of the main file would miss.
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    try {
      await tm.createTasks(Array.from({ length: 50 }, (_, i) => ({ title: `task ${i}` })), operator);
      await tm.transitionTask({ taskId: 1, to: 'cancelled', actor: operator });
      const r = await spawnCli(['--db', path, 'backup', backup]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`^backed up ${path} to ${backup} \\(\\d+ pages, \\d+ bytes, quick_check ok\\)$`));
      // One file: the check's empty -wal and -shm are not left beside it.
      expect(readdirSync(dir).filter((f) => f.startsWith('backup.db'))).toEqual(['backup.db']);

      const copy = createTaskManager({ store: createSqliteStore({ path: backup, readonly: true }) });
      try {
        const strip = (ts: Array<{ id: number; title: string; state: string }>) => ts.map((t) => [t.id, t.title, t.state]);
        expect(strip(await copy.findTasks({ limit: 100 }))).toEqual(strip(await tm.findTasks({ limit: 100 })));
      } finally {
        await copy.close();
      }

      const before = digest(backup);
      oneLine(await cli(path, 'backup', backup), new RegExp(`^taskloop: VALIDATION_FAILED: backup: ${backup} exists; a backup never overwrites a file`));
      expect(digest(backup)).toBe(before);
      expect(statSync(backup).size).toBeGreaterThan(0);
    } finally {
      await tm.close();
    }
  });
});

describe('taskloop info', () => {
  it('names the store, its versions and its capabilities, reading only; a missing database is STORE_NOT_FOUND and nothing is created', async () => {
    const dir = tempDir();
    const db = join(dir, 'info.db');
    const missing = await cli(join(dir, 'nope', 'x.db'), 'info');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('STORE_NOT_FOUND');
    expect(existsSync(join(dir, 'nope'))).toBe(false);
    expect((await cli(db, 'task', 'create', '--title', 'x')).code).toBe(0);
    const info = await cliJson<Record<string, unknown>>(db, 'info');
    expect(info).toMatchObject({
      kind: 'sqlite',
      location: db,
      schema_version: MIGRATIONS.length,
      known_schema_version: MIGRATIONS.length,
      readonly: true,
      capabilities: { multiple_hosts: false, pid_liveness: true, push_wakeups: true, skip_locked: false },
    });
    expect(String(info.version)).toMatch(/^3\.\d+\.\d+$/);
  });
});
