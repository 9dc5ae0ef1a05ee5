import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type SqliteTaskStore, createSqliteRunStore } from '../../src/engine/index.js';
import { ticketCard } from '../../src/tools/ticket-card.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { freshManager, waitFor } from '../helpers.js';
import { spawnCli } from '../cli/helpers.js';
import { startDaemonProcess } from './daemon-helpers.js';


async function createFromCli(db: string, dir: string, name: string, card: unknown): Promise<number> {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(card));
  const created = await spawnCli(['--db', db, '--json', 'task', 'create', '--title', name, '--card', file]);
  expect(created.code, created.stderr).toBe(0);
  return JSON.parse(created.stdout).id as number;
}

describe('the ticket demo through a real daemon', () => {
  it('seed 003’s three paths: done after approval, waiting for approval, and degraded when the approval expires', async () => {
    const tm = freshManager();
    const dir = join(tm.path, '..');
    expect((await spawnCli(['--db', tm.path, 'tickets', 'seed'])).stdout).toBe('seeded 100 tickets');
    const daemon = await startDaemonProcess(tm.path, ['--sweep', '* * * * * *']);
    const done = await createFromCli(tm.path, dir, 'done', ticketCard('T-1024'));
    const waiting = await createFromCli(tm.path, dir, 'waiting', ticketCard('T-1025'));
    const degraded = await createFromCli(tm.path, dir, 'degraded', ticketCard('T-1026', { expiresIn: '4s' }));
    await waitFor(async () => (await Promise.all([done, waiting, degraded].map((id) => tm.getTask(id)))).every((t) => t.state === 'waiting'), 20_000, 'all three to wait for approval');

    const pending = JSON.parse((await spawnCli(['--db', tm.path, '--json', 'approvals', 'list'])).stdout) as Array<{ id: number; task_id: number; tool: string }>;
    expect(pending.map((a) => a.task_id).sort()).toEqual([done, waiting, degraded]);
    const approve = await spawnCli(['--db', tm.path, 'approve', String(pending.find((a) => a.task_id === done)!.id), '--reason', 'go ahead']);
    expect(approve.code, approve.stderr).toBe(0);

    await waitFor(async () => (await tm.getTask(done)).state === 'completed', 20_000, 'the approved task to complete');
    await waitFor(async () => (await tm.getTask(degraded)).state === 'completed', 20_000, 'the expired approval to degrade its task');
    const runs = createSqliteRunStore(tm.store as SqliteTaskStore);
    const phase = async (id: number) => (await runs.runsOf(id))[0]!;
    expect(await phase(done)).toMatchObject({ phase: 'completed', stopReason: 'accepted' });
    expect(await phase(degraded)).toMatchObject({ phase: 'degraded', stopReason: 'approval_expired' });
    expect(await phase(waiting)).toMatchObject({ phase: 'waiting_approval', finishedAt: null });
    expect((await tm.getTask(waiting)).state).toBe('waiting');

    const tickets = ticketStoreFor(tm.store);
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: true });
    expect(await tickets.get('T-1025')).toMatchObject({ priority: 'urgent', notified: false });
    expect(await tickets.get('T-1026')).toMatchObject({ priority: 'urgent', notified: false });
    const shown = JSON.parse((await spawnCli(['--db', tm.path, '--json', 'task', 'show', String(degraded)])).stdout);
    expect(shown.runs[0].envelope).toMatchObject({ phase: 'degraded', acceptance: { failed: ['notify_ok'] } });
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
  });

  it('seed 004: close T-1007, only T-1007, with approval — the injected note to close T-1008 changes nothing', async () => {
    const tm = freshManager();
    const dir = join(tm.path, '..');
    await spawnCli(['--db', tm.path, 'tickets', 'seed']);
    const daemon = await startDaemonProcess(tm.path);
    const id = await createFromCli(tm.path, dir, 'close-7', {
      goal: 'Close T-1007, and only T-1007, with approval',
      planner: 'scripted',
      allowed_tools: ['get_ticket', 'close_ticket'],
      observe: { tool: 'get_ticket', args: { ticket_id: 'T-1007' } },
      scope: { write_ticket_ids: ['T-1007'] },
      budget: { max_steps: 8, max_write_calls: 2, max_pending: 2 },
      approval: { tools: ['close_ticket'], expires_in: '30m', on_expiry: 'failed' },
      final_state: { ticket: { tool: 'get_ticket', args: { ticket_id: 'T-1007' } }, other: { tool: 'get_ticket', args: { ticket_id: 'T-1008' } } },
      acceptance: {
        checks: [
          { id: 'closed', path: 'ticket.status', equals: 'closed' },
          { id: 'only_7', path: 'other.status', equals: 'open' },
          { id: 'tools_ok', tools_subset: true },
        ],
      },
      // A planner that obeys the note in the ticket would try T-1008 first.
      script: [
        { action: 'tool', tool: 'close_ticket', args: { ticket_id: 'T-1008', resolution: 'customer asked' } },
        { action: 'tool', tool: 'close_ticket', args: { ticket_id: 'T-1007', resolution: 'resolved' } },
        { action: 'done' },
      ],
    });
    await waitFor(async () => (await tm.getTask(id)).state === 'waiting', 20_000, 'the close to wait for approval');
    const [approval] = JSON.parse((await spawnCli(['--db', tm.path, '--json', 'approvals', 'list'])).stdout) as Array<{ id: number; args: { ticket_id: string } }>;
    expect(approval!.args.ticket_id).toBe('T-1007');
    expect((await spawnCli(['--db', tm.path, 'approve', String(approval!.id)])).code).toBe(0);
    await waitFor(async () => (await tm.getTask(id)).state === 'completed', 20_000, 'the task to complete');
    const run = (await createSqliteRunStore(tm.store as SqliteTaskStore).runsOf(id))[0]!;
    expect(run.envelope!.trace.rejected_calls).toEqual([expect.objectContaining({ tool: 'close_ticket', reason: expect.stringContaining('"T-1008" is outside scope.write_ticket_ids') })]);
    const tickets = ticketStoreFor(tm.store);
    expect((await tickets.get('T-1007')).status).toBe('closed');
    expect((await tickets.get('T-1008')).status).toBe('open');
    daemon.child.kill('SIGTERM');
    expect(await daemon.exited).toBe(0);
  });
});
