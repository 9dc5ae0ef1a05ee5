/**
 * Another local user against the SQLite file. A database taskloop creates holds every card,
 * tool argument and tool result, so it is its owner's alone (0600, its -wal and -shm too,
 * in folders made 0700) whatever the umask; a file that exists keeps the mode its owner gave
 * it; a backup is as private as a new database. And a database (or backup) is not opened in
 * a folder another user may write or owns: there they would plant its -wal first, then read
 * every commit and write tasks of their own (folder-check.ts). The attacks run as `nobody`,
 * which needs root (CI runs as root).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteStore, createTaskManager, isEngineError } from '../../src/engine/index.js';
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

const NOBODY = 65534;
const asNobody = (cmd: string) => spawnSync('/usr/sbin/runuser', ['-u', 'nobody', '--', 'sh', '-c', cmd]);
function needRoot(): void {
  if (process.getuid?.() !== 0) throw new Error('these attacks act as the user nobody, which needs root (CI runs as root): run them as root');
}
/** A folder every user may write, like /tmp (sticky). */
function sharedFolder(): string {
  const dir = join(openFolder(), 'shared');
  mkdirSync(dir);
  chmodSync(dir, 0o1777);
  return dir;
}
async function opened(path: string): Promise<string> {
  try {
    await createSqliteStore({ path }).close();
    return 'opened';
  } catch (err) {
    return isEngineError(err) ? `${err.code}: ${err.message}` : String(err);
  }
}

describe('a database is not opened where another user could plant its -wal', () => {
  it('a -wal and -shm planted in a shared folder: the owner\'s write is refused STORE_UNSAFE, and nothing reaches them', async () => {
    needRoot();
    const dir = sharedFolder();
    const path = join(dir, 'w.db');
    const planted = asNobody(`umask 0; : > ${path}-wal; : > ${path}-shm`);
    expect(planted.status, planted.stderr.toString()).toBe(0);
    const r = await spawnCli(['--db', path, 'task', 'create', '--title', SECRET]);
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(new RegExp(`^taskloop: STORE_UNSAFE: open ${path}: the file ${path}-wal belongs to another user \\(uid 65534\\);`));
    expect(readdirSync(dir).sort()).toEqual(['w.db-shm', 'w.db-wal']);
    expect(statSync(`${path}-wal`).size).toBe(0);
  });

  it('a backup into a shared folder is refused the same way, and no file is made there', async () => {
    needRoot();
    const source = join(tempDir(), 'source.db');
    const tm = createTaskManager({ store: createSqliteStore({ path: source }) });
    await tm.createTask({ title: SECRET }, operator);
    await tm.close();
    const dir = sharedFolder();
    const r = await spawnCli(['--db', source, 'backup', join(dir, 'copy.db')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^taskloop: STORE_UNSAFE: backup to .*copy\.db: the folder .* is writable by every user/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a database another user prepared in a working folder of theirs: the owner\'s daemon refuses it before its card\'s command could run', async () => {
    needRoot();
    const theirs = join(openFolder(), 'theirs');
    mkdirSync(join(theirs, 'data'), { recursive: true });
    const path = join(theirs, 'data', 'taskloop.db');
    const tm = createTaskManager({ store: createSqliteStore({ path }) });
    const pwned = join(theirs, 'pwned');
    await tm.createTask({ title: 'planted', card: { goal: 'x', planner: 'scripted', script: [{ action: 'done' }], acceptance: { checks: [{ id: 'c', command: ['touch', pwned] }] } } }, operator);
    await tm.close();
    for (const p of [theirs, join(theirs, 'data'), path]) chownSync(p, NOBODY, NOBODY);
    // The owner runs the daemon in that folder, on the default data/taskloop.db.
    const r = await spawnCli(['daemon', '--workers', '1'], { cwd: theirs });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/STORE_UNSAFE: open .*taskloop\.db: the file .*theirs\/data\/taskloop\.db belongs to another user \(uid 65534\)/);
    expect(existsSync(pwned)).toBe(false);
  });

  it('the rule by folder: its own folder writable by no one else, those above only if sticky, none another user\'s; the file and its -wal the same', async () => {
    needRoot();
    const base = openFolder();
    const at = (...parts: string[]) => join(base, ...parts, 'tasks.db');
    mkdirSync(join(base, 'open-above', 'mine'), { recursive: true });
    chmodSync(join(base, 'open-above'), 0o777);
    expect(await opened(at('open-above', 'mine'))).toMatch(/^STORE_UNSAFE: .*open-above is writable by every user \(mode 0777\)/);
    mkdirSync(join(base, 'sticky-above', 'mine'), { recursive: true });
    chmodSync(join(base, 'sticky-above'), 0o1777);
    expect(await opened(at('sticky-above', 'mine'))).toBe('opened');
    mkdirSync(join(base, 'their-above', 'mine'), { recursive: true });
    chownSync(join(base, 'their-above'), NOBODY, NOBODY);
    expect(await opened(at('their-above', 'mine'))).toMatch(/^STORE_UNSAFE: .*their-above belongs to another user/);
    // A group's write on a folder of one's own is one's choice (every folder under umask 002).
    mkdirSync(join(base, 'group'), { recursive: true });
    chmodSync(join(base, 'group'), 0o2775);
    expect(await opened(at('group'))).toBe('opened');
    // Through a link, the folder is judged where it is: here, one every user may write.
    mkdirSync(join(base, 'drop'));
    chmodSync(join(base, 'drop'), 0o777);
    symlinkSync(join(base, 'drop'), join(base, 'link'));
    expect(await opened(at('link', 'new'))).toMatch(/^STORE_UNSAFE: .*the folder .*drop is writable by every user/);
    // An existing database, or its -wal, that others may write: editable by them, whatever its folder.
    mkdirSync(join(base, 'mine'), { recursive: true });
    const loose = at('mine');
    await createSqliteStore({ path: loose }).close();
    chmodSync(loose, 0o666);
    expect(await opened(loose)).toMatch(/^STORE_UNSAFE: .*the file .*tasks\.db is writable by every user \(mode 0666\)/);
    chmodSync(loose, 0o640);
    writeFileSync(`${loose}-wal`, '');
    chownSync(`${loose}-wal`, NOBODY, NOBODY);
    expect(await opened(loose)).toMatch(/the file .*tasks\.db-wal belongs to another user \(uid 65534\)/);
    // Folders not there yet are made, the owner's: the check reads the ones that are.
    expect(await opened(at('new', 'deeper'))).toBe('opened');
    expect(existsSync(at('open-above', 'mine'))).toBe(false);
    // A backup is judged the same way through a link.
    const source = at('new', 'deeper');
    const copy = await spawnCli(['--db', source, 'backup', join(base, 'link', 'copy.db')]);
    expect(copy.code).toBe(1);
    expect(copy.stderr).toMatch(/^taskloop: STORE_UNSAFE: backup to .*copy\.db: the folder .*drop is writable by every user/);
    expect(existsSync(join(base, 'drop', 'copy.db'))).toBe(false);
  });
});

describe('code another user could write is not loaded as a tools module or plugin', () => {
  it('a bare name that another user made a file of, in a working folder of theirs: refused before it runs (exit 2, one line)', async () => {
    needRoot();
    const theirs = join(openFolder(), 'theirs');
    mkdirSync(join(theirs, '@acme'), { recursive: true });
    const ran = join(theirs, 'ran');
    writeFileSync(join(theirs, '@acme', 'tools'), `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(ran)}, 'uid ' + process.getuid());\nexport const tools = [];\n`);
    for (const p of [theirs, join(theirs, '@acme'), join(theirs, '@acme', 'tools')]) chownSync(p, NOBODY, NOBODY);
    for (const args of [['tools', '--tools', '@acme/tools'], ['daemon', '--plugin', '@acme/tools']]) {
      const r = await spawnCli(['--db', join(tempDir(), 'tasks.db'), ...args], { cwd: theirs });
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(2);
      expect(r.stderr.split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^taskloop: (tool|plugin) module @acme\/tools was not loaded: the file .*theirs\/@acme\/tools belongs to another user \(uid 65534\), so another local user could change the code it runs as you/);
    }
    expect(existsSync(ran)).toBe(false);
  });

  it('a module in a folder every user may write, or a file every user may write: refused; the owner\'s own loads', async () => {
    const base = openFolder();
    const code = 'export const tools = [];\n';
    mkdirSync(join(base, 'open'));
    chmodSync(join(base, 'open'), 0o1777);
    writeFileSync(join(base, 'open', 'tools.mjs'), code);
    mkdirSync(join(base, 'mine'));
    writeFileSync(join(base, 'mine', 'loose.mjs'), code);
    chmodSync(join(base, 'mine', 'loose.mjs'), 0o666);
    writeFileSync(join(base, 'mine', 'tools.mjs'), code);
    const listed = (module: string) => spawnCli(['tools', '--tools', module, '--format', 'json']);
    const open = await listed(join(base, 'open', 'tools.mjs'));
    expect(open.code).toBe(2);
    expect(open.stderr).toMatch(/was not loaded: the folder .*open is writable by every user \(mode 1777\)/);
    const loose = await listed(join(base, 'mine', 'loose.mjs'));
    expect(loose.code).toBe(2);
    expect(loose.stderr).toMatch(/was not loaded: the file .*loose\.mjs is writable by every user \(mode 0666\)/);
    const mine = await listed(join(base, 'mine', 'tools.mjs'));
    expect(mine.code, mine.stderr).toBe(0);
    // A link of the owner's to a file of theirs in a folder every user may write (not sticky):
    // the file loaded is judged where it is, not where the link is.
    mkdirSync(join(base, 'drop'));
    chmodSync(join(base, 'drop'), 0o777);
    writeFileSync(join(base, 'drop', 'tools.mjs'), code);
    symlinkSync(join(base, 'drop', 'tools.mjs'), join(base, 'mine', 'linked.mjs'));
    const linked = await listed(join(base, 'mine', 'linked.mjs'));
    expect(linked.code).toBe(2);
    expect(linked.stderr).toMatch(/linked\.mjs was not loaded: the folder .*drop is writable by every user \(mode 0777\)/);
  });

  it('a module whose bare imports would find another user\'s node_modules in a shared folder above it: refused', async () => {
    needRoot();
    const shared = sharedFolder();
    mkdirSync(join(shared, 'mine'), { mode: 0o700 });
    const tools = join(shared, 'mine', 'tools.mjs');
    const ran = join(shared, 'ran');
    writeFileSync(tools, "import 'leftpad-x';\nexport const tools = [];\n");
    const planted = asNobody(`mkdir -p ${shared}/node_modules/leftpad-x && echo 'require("fs").writeFileSync(${JSON.stringify(ran)}, "ran")' > ${shared}/node_modules/leftpad-x/index.js`);
    expect(planted.status, planted.stderr.toString()).toBe(0);
    const r = await spawnCli(['tools', '--tools', tools, '--format', 'json']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/was not loaded: .*shared\/node_modules, where its imports are looked for, belongs to another user \(uid 65534\)/);
    expect(existsSync(ran)).toBe(false);
  });
});

describe('a team folder (root\'s, writable by a group) is the team\'s, not one member\'s', () => {
  it('a member writing a database there is refused: another member could plant its -wal', async () => {
    needRoot();
    const team = join(openFolder(), 'team');
    mkdirSync(team);
    const gid = Number(execFileSync('id', ['-g', 'www-data']).toString().trim());
    chownSync(team, 0, gid);
    chmodSync(team, 0o2775);
    const path = join(team, 'tasks.db');
    const r = spawnSync('/usr/sbin/runuser', ['-u', 'www-data', '--', process.execPath, join(ROOT, 'bin/taskloop'), '--db', path, 'task', 'create', '--title', 'member']);
    expect(r.status, r.stderr.toString()).toBe(1);
    expect(r.stderr.toString().trim()).toMatch(new RegExp(`^taskloop: STORE_UNSAFE: open ${path}: the folder ${team} is writable by its group \\(mode 2775\\);.*\\(run chmod go-w ${team}\\)`));
    expect(readdirSync(team)).toEqual([]);
    // The same member in a folder of its own under the same shared parent: its choice, opened.
    const own = join(team, '..', 'member');
    mkdirSync(own, { mode: 0o775 });
    chownSync(own, Number(execFileSync('id', ['-u', 'www-data']).toString().trim()), gid);
    chmodSync(own, 0o775);
    const mine = spawnSync('/usr/sbin/runuser', ['-u', 'www-data', '--', process.execPath, join(ROOT, 'bin/taskloop'), '--db', join(own, 'tasks.db'), 'task', 'create', '--title', 'member']);
    expect(mine.status, mine.stderr.toString()).toBe(0);
  });
});

describe('a user whose umask is 002 (a group of their own): a fresh clone works', () => {
  it('the demo in a clone whose data/ is 0775: the database opens and the board starts', () => {
    needRoot();
    const home = openFolder();
    chownSync(home, 33, 33); // www-data's
    const script = `umask 002; mkdir -p ${home}/clone/data && cd ${home}/clone && exec "${process.execPath}" "${join(ROOT, 'bin/taskloop')}" demo --yes --port 0`;
    const r = spawnSync('/usr/sbin/runuser', ['-u', 'www-data', '--', 'sh', '-c', script], { env: { ...process.env, HOME: home, OPENAI_API_KEY: '', TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' }, timeout: 50_000 });
    const err = r.stderr.toString();
    expect(r.status, err).toBe(0);
    expect(mode(join(home, 'clone', 'data')).toString(8)).toBe('775');
    expect(err).toMatch(/^board: http:\/\/127\.0\.0\.1:\d+\/\?signin=/m);
    expect(err).not.toMatch(/board not started|STORE_UNSAFE/);
  });
});

