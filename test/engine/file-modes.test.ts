/**
 * Another local user against the SQLite file: a database taskloop creates holds every card,
 * tool argument and tool result, so it is its owner's alone (0600, its -wal and -shm too,
 * in folders made 0700) whatever the umask; a file that exists keeps the mode its owner gave
 * it; a backup is as private as a new database.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager } from '../../src/engine/index.js';
import { ROOT, operator, tempDir } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';

const mode = (path: string) => statSync(path).mode & 0o777;
const SECRET = 'sk-live-0123456789abcdef';

let umask: number;
beforeEach(() => {
  umask = process.umask(0o022); // the usual one, which leaves SQLite's own files readable by all
});
afterEach(() => {
  process.umask(umask);
});

/** A folder every local user may enter, as a shared or home folder often is. */
function openFolder(): string {
  const dir = tempDir();
  chmodSync(dir, 0o755);
  return dir;
}

describe('a database file is its owner\'s alone', () => {
  it('a new file and the folders made for it: 0600 and 0700, the -wal and -shm 0600 while it is open', async () => {
    const path = join(openFolder(), 'data', 'nested', 'taskloop.db');
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    await tm.createTask({ title: 'holds a secret', card: { goal: `use ${SECRET}` } }, operator);
    expect(mode(path).toString(8)).toBe('600');
    expect(existsSync(`${path}-wal`)).toBe(true);
    expect(mode(`${path}-wal`).toString(8)).toBe('600');
    expect(mode(`${path}-shm`).toString(8)).toBe('600');
    expect(mode(join(path, '..')).toString(8)).toBe('700');
    expect(mode(join(path, '..', '..')).toString(8)).toBe('700');
    await tm.close();
  });

  it('a umask that takes the owner\'s own write bit still leaves the owner a file it can write', async () => {
    process.umask(0o277);
    const path = join(tempDir(), 'taskloop.db');
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    await tm.createTask({ title: 'written' }, operator);
    expect(mode(path).toString(8)).toBe('600');
    await tm.close();
  });

  it('an existing file keeps its mode: sharing it with a group is its owner\'s choice', async () => {
    const path = join(tempDir(), 'shared.db');
    writeFileSync(path, '');
    chmodSync(path, 0o640);
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    await tm.createTask({ title: 'in a shared file' }, operator);
    expect(mode(path).toString(8)).toBe('640');
    expect(mode(`${path}-wal`).toString(8)).toBe('640');
    await tm.close();
  });

  it('the CLI that creates the file (task create) and a backup: 0600 under umask 022', async () => {
    const dir = openFolder();
    const path = join(dir, 'cli.db');
    const made = spawnSync('sh', ['-c', `umask 022; exec "${process.execPath}" "${join(ROOT, 'bin/taskloop')}" --db "${path}" task create --title "${SECRET}"`]);
    expect(made.status, made.stderr.toString()).toBe(0);
    expect(mode(path).toString(8)).toBe('600');
    const backup = join(dir, 'copy.db');
    const r = await spawnCli(['--db', path, 'backup', backup]);
    expect(r.code, r.stderr).toBe(0);
    expect(mode(backup).toString(8)).toBe('600');
  });

  it('another local user (nobody) reads none of it: not the file, not its -wal, not a backup', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test reads as the user nobody, which needs root (CI runs as root): run it as root');
    const dir = openFolder();
    const path = join(dir, 'taskloop.db');
    mkdirSync(join(dir, 'elsewhere'), { mode: 0o755 });
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    await tm.createTask({ title: 'holds a secret', card: { goal: `use ${SECRET}` } }, operator);
    const backup = join(dir, 'elsewhere', 'copy.db');
    expect((await spawnCli(['--db', path, 'backup', backup])).code).toBe(0);
    // As the attacker: a plain read of each file, the way any program of theirs would.
    for (const file of [path, `${path}-wal`, backup]) {
      expect(existsSync(file)).toBe(true);
      const asThem = spawnSync('/usr/sbin/runuser', ['-u', 'nobody', '--', 'cat', file]);
      expect(asThem.status, `nobody read ${file}`).not.toBe(0);
      expect(asThem.stderr.toString()).toMatch(/Permission denied/);
      expect(asThem.stdout.toString()).not.toContain(SECRET);
    }
    // The owner reads it (the secret is there to be kept).
    expect(execFileSync('cat', [path, `${path}-wal`]).toString('latin1')).toContain(SECRET);
    await tm.close();
  });
});
