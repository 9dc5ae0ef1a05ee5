import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers.js';
import { cli, cliJson, spawnCli } from './helpers.js';

function fingerprint(db: string): string {
  const conn = new Database(db, { readonly: true });
  try {
    return JSON.stringify([conn.prepare('SELECT * FROM tasks ORDER BY id').all(), conn.prepare('SELECT * FROM task_events ORDER BY id').all()]);
  } finally {
    conn.close();
  }
}

describe('bad input through the CLI', () => {
  it('answers each with one line naming its code, the right exit code, and writes nothing', async () => {
    const dir = tempDir();
    const db = join(dir, 't.db');
    await cliJson(db, 'task', 'create', '--title', 'keep me', '--card', writeCard(dir, 'ok.json', '{"goal":"g"}'));
    const before = fingerprint(db);
    const cases: Array<[string[], number, string]> = [
      [['task', 'show', '42'], 1, 'TASK_NOT_FOUND'],
      [['task', 'show', 'abc'], 1, 'VALIDATION_FAILED'],
      [['task', 'show', '1; DROP TABLE tasks'], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--card', writeCard(dir, 'bad.json', '{"goal": ')], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--card', writeCard(dir, 'arr.json', '[1,2]')], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--card', writeCard(dir, 'str.json', '"card"')], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--card', join(dir, 'missing.json')], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 'x'.repeat(501)], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--priority', 'high'], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--priority', '1.5'], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--max-attempts', '0'], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--run-after', 'tomorrow'], 1, 'VALIDATION_FAILED'],
      [['task', 'create', '--title', 't', '--depends-on', '77'], 1, 'TASK_NOT_FOUND'],
      [['task', 'create', '--title', 't', '--queue', "q'; --"], 1, 'VALIDATION_FAILED'],
      [['task', 'transition', '1', 'finished'], 1, 'VALIDATION_FAILED'],
      [['task', 'transition', '1', 'completed'], 1, 'INVALID_TRANSITION'],
      [['task', 'transition', '1', 'DROP TABLE'], 1, 'VALIDATION_FAILED'],
      [['task', 'list', '--state', 'bogus'], 1, 'VALIDATION_FAILED'],
      [['task', 'list', '--limit', 'ten'], 1, 'VALIDATION_FAILED'],
      [['task', 'claim', '--lease', 'forever', '--as', 'w'], 1, 'VALIDATION_FAILED'],
      [['--as', 'w', 'task', 'heartbeat', '1', '--token', 'nope'], 1, 'INVALID_TRANSITION'],
      [['--as', 'mallory', 'task', 'cancel', '1'], 1, 'FORBIDDEN'],
      [['task', 'claim'], 2, 'USAGE'],
      [['task', 'create'], 2, 'USAGE'],
      [['task', 'frobnicate'], 2, 'USAGE'],
      [['--durability', 'sometimes', 'stats'], 1, 'VALIDATION_FAILED'],
    ];
    for (const [args, exit, code] of cases) {
      const text = await cli(db, ...args);
      expect(text.code, args.join(' ')).toBe(exit);
      expect(text.stderr.split('\n'), args.join(' ')).toHaveLength(1);
      if (code !== 'USAGE') expect(text.stderr, args.join(' ')).toMatch(new RegExp(`^taskloop: ${code}: `));
      const json = await cli(db, '--json', ...args);
      expect(JSON.parse(json.stderr), args.join(' ')).toMatchObject({ error: { code } });
      expect(json.stderr).not.toMatch(/\n|at .*\.js:\d+/);
    }
    expect(fingerprint(db)).toBe(before);
  });

  it('refuses a card nested 5,000 levels on standard input with one VALIDATION_FAILED line naming the limit, and writes nothing', async () => {
    const dir = tempDir();
    const db = join(dir, 't.db');
    await cliJson(db, 'task', 'create', '--title', 'keep me');
    const before = fingerprint(db);
    const deep = `{"goal":"g","x":${'['.repeat(5000)}${']'.repeat(5000)}}`;
    for (const args of [['task', 'create', '--title', 't', '--card', '-'], ['card', 'check', '-']]) {
      const r = await spawnCli(['--db', db, ...args], { input: deep });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toBe('taskloop: VALIDATION_FAILED: card nests deeper than 64 levels (JSON input may nest at most 64)');
    }
    const file = await cli(db, '--json', 'task', 'create', '--title', 't', '--card', writeCard(dir, 'deep.json', deep));
    expect(JSON.parse(file.stderr)).toEqual({ error: { code: 'VALIDATION_FAILED', message: 'card nests deeper than 64 levels (JSON input may nest at most 64)' } });
    expect(fingerprint(db)).toBe(before);
  });

  it('keeps SQL metacharacters and unicode intact in every text field', async () => {
    const db = join(tempDir(), 't.db');
    const nasty = `Robert'); DROP TABLE tasks;-- 任务 🚀 "q" %_`;
    // An identity is a plain name; the text is kept verbatim everywhere else.
    expect((await cli(db, '--as', nasty, 'task', 'list')).stderr).toMatch(/^taskloop: VALIDATION_FAILED: --as: .* is not a plain name/);
    const created = await cliJson(db, '--as', 'robert', 'task', 'create', '--title', nasty, '--for', 'robert', '--idempotency-key', nasty);
    expect(created).toMatchObject({ title: nasty, creator: 'robert', for_agent: 'robert', idempotency_key: nasty });
    const claim = await cliJson<{ claim_token: string }>(db, '--as', 'robert', 'task', 'claim');
    const moved = await cliJson(db, '--as', 'robert', 'task', 'transition', '1', 'in_progress', '--token', claim.claim_token, '--reason', nasty);
    expect(moved.assignee).toBe('robert');
    const shown = await cliJson<{ events: Array<{ data: { reason?: string } }> }>(db, 'task', 'show', '1');
    expect(shown.events.at(-1)!.data.reason).toBe(nasty);
  });
});

function writeCard(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('a database URL', () => {
  it('other than postgres:// is refused as a usage error, writes nothing and prints no password', async () => {
    const dir = tempDir();
    const r = await spawnCli(['--db', 'mysql://u:secret@h:3306/db', 'task', 'create', '--title', 't'], { cwd: dir });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^taskloop: --db \(or TASKLOOP_DB\): 'mysql:\/\/…@h:3306\/db' is a URL taskloop cannot store tasks at/);
    expect(r.stderr).not.toContain('secret');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('postgres:// with no server behind it: one STORE_UNAVAILABLE line, exit 1, no password, no file', async () => {
    const dir = tempDir();
    const r = await spawnCli(['--db', 'postgres://u:secret@127.0.0.1:1/db', 'task', 'create', '--title', 't'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^taskloop: STORE_UNAVAILABLE: /);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).not.toContain('secret');
    expect(readdirSync(dir)).toEqual([]);
  });
});
