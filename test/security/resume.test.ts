/**
 * Crash recovery must not be a way around the gate. A run records an action step (status
 * `started`, with the planner's raw arguments) before the gate decides on the call; a crash
 * in that window leaves a `started` step the gate never admitted. On resume,
 * `resumeInterrupted` (src/workers/loop-resume.ts) re-executes any `started` step of a read
 * or idempotent tool with its recorded arguments, without passing the gate again: no
 * allowlist, no scope, no hooks, no approval. `close_ticket` and `notify_oncall` are high
 * risk and idempotent, so a lost gate decision turns into an unapproved write.
 *
 * Correct behaviour: a resumed step that the gate never admitted goes through the whole gate
 * (or is simply decided again); nothing out of the card's allowlist or scope runs, and a
 * high-risk call still waits for a person.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { ticketStoreFor } from '../../src/tools/tickets.js';
import { runTaskLoop } from '../../src/workers/loop.js';
import { ROOT, agent, tempDir, waitFor } from '../helpers.js';
import { newDatabase, openStores } from '../stores.js';
import { startDaemonProcess } from '../workers/daemon-helpers.js';
import { card, drive, harness, loopContext } from '../workers/harness.js';

const sweeper = { id: 'sweeper', role: 'system' } as const;

describe('crash recovery and the gate', () => {
  it('a step recorded but not yet gated is not carried out on resume: a call outside allowed_tools and scope, needing an approval, stays undone', async () => {
    const h = harness();
    const tickets = ticketStoreFor(h.tm.store);
    await tickets.seed();
    // An agent's card: it may only read tickets, and write none but T-1001. Its planner (a
    // hostile model, here a script) proposes closing T-1050: refused at the allowlist,
    // and it would need an approval anyway.
    await h.tm.createTask({
      title: 'look at a ticket',
      card: card({
        allowed_tools: ['get_ticket'],
        scope: { write_ticket_ids: ['T-1001'] },
        budget: { max_steps: 10, max_write_calls: 3 },
        script: [{ action: 'tool', tool: 'close_ticket', args: { ticket_id: 'T-1050', resolution: 'closed by the model' } }, { action: 'done' }],
      }),
    }, agent('mallory'));
    const claim = (await h.tm.claimTask({ agent: 'worker', start: true }))!;
    const gen = runTaskLoop(loopContext(h, claim));
    for (;;) {
      const { value } = await gen.next();
      if (value !== undefined && typeof value === 'object' && 'type' in value && value.type === 'step_started' && value.step.tool === 'close_ticket') break;
    }
    // The worker dies right after the step was recorded, before the gate said anything; its
    // lease runs out and the sweep puts the task back.
    await h.tm.store.transition({ taskId: claim.id, to: 'pending', actor: sweeper });

    // The dead worker's held-back steps may be on their way out at this moment (its journal's
    // flush, refused once the claim is gone); on PostgreSQL a claim meanwhile skips the row it
    // locks (SKIP LOCKED). Claim until the task is had, as a daemon's next claim would.
    const again = await waitFor(() => h.tm.claimTask({ agent: 'rescuer', start: true }), 10_000, 'the task to be claimable again');
    await drive(loopContext(h, again));

    expect(await tickets.get('T-1050')).toMatchObject({ status: 'open' });
    const step = (await h.runs.getRun(1)).steps.find((s) => s.tool === 'close_ticket')!;
    expect(step.status).not.toBe('ok');
  });

  it('a daemon killed while a tool_before hook decides on a high-risk call: the next daemon neither skips the hook nor the approval', async () => {
    const dir = tempDir();
    const db = newDatabase(dir);
    const { store, runs } = openStores(db);
    const tm = createTaskManager({ store });
    const tickets = ticketStoreFor(store);
    await tickets.seed();
    try {
      await tm.createTask({
        title: 'close a ticket',
        card: card({
          allowed_tools: ['get_ticket', 'close_ticket'],
          scope: { write_ticket_ids: ['T-1050'] },
          budget: { max_steps: 10, max_write_calls: 3 },
          script: [{ action: 'tool', tool: 'close_ticket', args: { ticket_id: 'T-1050' } }, { action: 'done' }],
        }),
      }, agent('mallory'));
      const marker = join(dir, 'deciding');
      const config = join(dir, 'plugins.json');
      writeFileSync(config, JSON.stringify({ [join(ROOT, 'test/security/fixtures/slow-policy.mjs')]: { marker, ms: 4000 } }));
      const plugin = ['--plugin', join(ROOT, 'test/security/fixtures/slow-policy.mjs'), '--plugin-config', config];
      const first = await startDaemonProcess(db, ['--workers', '1', '--agent', 'first', '--lease', '2s', ...plugin]);
      await waitFor(() => existsSync(marker), 20_000, 'the hook to start deciding');
      first.child.kill('SIGKILL');
      await first.exited;

      // The same policy runs on the next daemon too.
      const second = await startDaemonProcess(db, ['--workers', '1', '--agent', 'second', ...plugin]);
      await waitFor(async () => {
        const [task] = await tm.findTasks({});
        return task !== undefined && ['completed', 'failed', 'waiting', 'cancelled'].includes(task.state) ? task : undefined;
      }, 30_000, 'the task to settle on the second daemon');
      second.child.kill('SIGTERM');
      await second.exited;

      // The hook would have blocked it, and a person never approved it.
      expect(await tickets.get('T-1050')).toMatchObject({ status: 'open' });
      const steps = (await runs.getRun(1)).steps.filter((s) => s.tool === 'close_ticket');
      expect(steps.map((s) => s.status)).not.toContain('ok');
    } finally {
      await tm.close();
    }
  });
});
