import { join } from 'node:path';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers.js';
import { cli, cliJson, spawnCli } from './helpers.js';

const TASK_KEYS = ['id', 'title', 'state', 'priority', 'creator', 'assignee', 'attempts', 'max_attempts', 'depends_on', 'queue',
  'created_at', 'updated_at', 'lease_expires_at', 'card', 'result'];

describe('taskloop task', () => {
  it('creates, claims, starts, submits and completes a task, printing snake_case JSON', async () => {
    const db = join(tempDir(), 't.db');
    const cardFile = join(tempDir(), 'card.json');
    writeFileSync(cardFile, JSON.stringify({ goal: 'say hi' }));
    const created = await cliJson(db, 'task', 'create', '--title', 'greet', '--card', cardFile, '--priority', '3');
    for (const key of TASK_KEYS) expect(created).toHaveProperty(key);
    expect(created).toMatchObject({ id: 1, state: 'pending', priority: 3, creator: 'operator', card: { goal: 'say hi' } });

    const claim = await cliJson<{ claim_token: string; state: string }>(db, '--as', 'bot', 'task', 'claim', '--lease', '2m');
    expect(claim.state).toBe('claimed');
    const token = claim.claim_token;
    expect((await cli(db, '--as', 'bot', 'task', 'heartbeat', '1', '--token', token)).code).toBe(0);
    expect((await cliJson(db, '--as', 'bot', 'task', 'transition', '1', 'in_progress', '--token', token)).state).toBe('in_progress');
    expect((await cliJson(db, '--as', 'bot', 'task', 'transition', '1', 'review', '--token', token)).state).toBe('review');
    // The assignee cannot pass its own review; the operator (the CLI's default identity) can.
    const self = await cli(db, '--as', 'bot', 'task', 'transition', '1', 'completed', '--token', token);
    expect(self.code).toBe(1);
    expect(self.stderr).toMatch(/^taskloop: FORBIDDEN: /);
    const done = await cli(db, 'task', 'transition', '1', 'completed', '--reason', 'looks good');
    expect(done).toMatchObject({ code: 0, stdout: 'task 1: review -> completed' });

    const shown = await cliJson<{ events: Array<{ type: string; data: { to: string } }> }>(db, 'task', 'show', '1');
    expect(shown.events.map((e) => e.data.to)).toEqual(['pending', 'claimed', 'in_progress', 'review', 'completed']);
    const stats = await cliJson<{ tasks_by_state: Record<string, number> }>(db, 'stats');
    expect(stats.tasks_by_state.completed).toBe(1);
  });

  it('exits 3 when there is nothing to claim, and honours queue, capabilities and --for', async () => {
    const db = join(tempDir(), 't.db');
    await cliJson(db, 'task', 'create', '--title', 'gpu work', '--requires', 'gpu', '--queue', 'ml');
    await cliJson(db, 'task', 'create', '--title', 'for ann', '--for', 'ann');
    expect((await cli(db, '--as', 'bob', 'task', 'claim')).code).toBe(3);
    expect((await cli(db, '--as', 'bob', 'task', 'claim', '--queue', 'ml')).code).toBe(3);
    expect((await cliJson(db, '--as', 'bob', 'task', 'claim', '--queue', 'ml', '--capabilities', 'cpu,gpu')).title).toBe('gpu work');
    expect((await cliJson(db, '--as', 'ann', 'task', 'claim')).title).toBe('for ann');
    const none = await cli(db, '--json', '--as', 'ann', 'task', 'claim');
    expect(none).toMatchObject({ code: 3, stdout: 'null' });
  });

  it('lists with filters, honours dependencies, run-after and idempotency keys', async () => {
    const db = join(tempDir(), 't.db');
    await cliJson(db, 'task', 'create', '--title', 'first', '--idempotency-key', 'k1');
    const again = await cliJson(db, 'task', 'create', '--title', 'first again', '--idempotency-key', 'k1');
    expect(again).toMatchObject({ id: 1, created: false });
    await cliJson(db, 'task', 'create', '--title', 'second', '--depends-on', '1', '--priority', '9');
    await cliJson(db, 'task', 'create', '--title', 'later', '--run-after', '+1h', '--priority', '9');
    const claim = await cliJson(db, '--as', 'w', 'task', 'claim');
    expect(claim.title).toBe('first');
    const pending = await cliJson<Array<{ title: string }>>(db, 'task', 'list', '--state', 'pending');
    expect(pending.map((t) => t.title)).toEqual(['second', 'later']);
    const mine = await cliJson<Array<{ id: number }>>(db, 'task', 'list', '--assignee', 'w');
    expect(mine.map((t) => t.id)).toEqual([1]);
    const text = await cli(db, 'task', 'list', '--limit', '1');
    expect(text.stdout.split('\n')).toHaveLength(2);
    const cancelled = await cli(db, 'task', 'cancel', '3', '--reason', 'not needed');
    expect(cancelled).toMatchObject({ code: 0, stdout: 'task 3 cancelled' });
  });

  it('prints the event log, by task and from a cursor', async () => {
    const db = join(tempDir(), 't.db');
    await cliJson(db, 'task', 'create', '--title', 'a');
    await cliJson(db, 'task', 'create', '--title', 'b');
    await cli(db, 'task', 'cancel', '1');
    const all = await cli(db, 'events');
    expect(all.stdout.split('\n')).toHaveLength(3);
    const one = await cli(db, '--json', 'events', '--task', '1', '--since', '1');
    expect(one.stdout.split('\n').map((l) => JSON.parse(l).type)).toEqual(['task.cancelled']);
  });
});

describe('the real binary', () => {
  it('reads a card from standard input, uses TASKLOOP_DB, and follows exit codes', async () => {
    const db = join(tempDir(), 'env.db');
    const env = { TASKLOOP_DB: db };
    const created = await spawnCli(['--json', 'task', 'create', '--title', 'from stdin', '--card', '-'], { env, input: '{"goal":"x"}' });
    expect(created.code).toBe(0);
    expect(JSON.parse(created.stdout)).toMatchObject({ id: 1, card: { goal: 'x' } });
    const usage = await spawnCli(['task', 'create'], { env });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe("taskloop: required option '--title <text>' not specified");
    const refused = await spawnCli(['task', 'show', '99'], { env });
    expect(refused).toMatchObject({ code: 1, stderr: 'taskloop: TASK_NOT_FOUND: task 99 does not exist' });
    const nothing = await spawnCli(['--as', 'w', 'task', 'claim', '--queue', 'empty'], { env });
    expect(nothing.code).toBe(3);
  });

  it('--version prints the package’s version and exits 0', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const r = await spawnCli(['--version']);
    expect(r).toMatchObject({ code: 0, stdout: version });
  });

  it('task list keeps its columns when an agent’s name is longer than the column (titles line up)', async () => {
    const db = join(tempDir(), 't.db');
    const long = 'daemon-build-host-12345-with-a-long-name';
    await cli(db, 'task', 'create', '--title', 'first');
    await cli(db, 'task', 'create', '--title', 'second', '--priority', '-1000');
    expect((await cli(db, '--as', long, 'task', 'claim')).code).toBe(0);
    const lines = (await cli(db, 'task', 'list')).stdout.split('\n');
    expect(lines).toHaveLength(3);
    const at = lines[0]!.indexOf('TITLE');
    expect(lines.slice(1).map((l) => l.slice(at))).toEqual(['first', 'second']);
    expect(lines[1]).toContain(`${long} `);
  });

  it('no subcommand prints the help on stderr and exits 2, with no stray error line', async () => {
    for (const args of [[], ['task'], ['approvals']]) {
      const r = await spawnCli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/^Usage: taskloop/);
      expect(r.stderr).not.toMatch(/outputHelp|^taskloop: /m);
    }
  });
});
