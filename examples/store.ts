// The store without a daemon: open a file, create, claim, work and finish a task, read the
// event log, and join the liveness registry so peers on this host reclaim at once what
// this process held if it dies.
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type ClaimedTask, EngineError, OPERATOR, isEngineError, openStore } from 'taskloop';

const dir = mkdtempSync(join(tmpdir(), 'taskloop-example-store-'));
try {
  // A postgres:// URL opens the PostgreSQL store; any other URL is refused with a stable code.
  try {
    await openStore({ path: 'mysql://user:secret@db.example/tasks' });
    throw new Error('a URL was accepted');
  } catch (err) {
    if (!isEngineError(err) || err.code !== 'VALIDATION_FAILED' || err.message.includes('secret')) throw err;
  }

  const store = await openStore({ path: join(dir, 'tasks.db') });
  const { tm, runs } = store;
  const { task } = await tm.createTask({ title: 'Summarise the report', queue: 'reports', card: { url: 'https://example.invalid/r.pdf' } }, OPERATOR);

  // The liveness registry: one row for this process, one slot per task it works on.
  const me = `${hostname()}-${process.pid}-example`;
  await runs.registerDaemon({ id: me, host: hostname(), pid: process.pid, agent: 'summariser', threads: 1 });
  const slot = `${me}/0`;
  const claimed: ClaimedTask | null = await tm.claimTask({ agent: 'summariser', queue: 'reports', start: true, workerId: slot, leaseMs: 30_000 });
  if (claimed === null || claimed.id !== task.id) throw new Error('nothing claimed');
  await runs.heartbeatDaemon(me, [slot]); // renews the lease of every task the slots hold: one write

  // Fenced writes: the claim token must be the current one.
  await tm.transitionTask({ taskId: claimed.id, to: 'review', actor: { id: 'summariser', role: 'agent' }, claimToken: claimed.claimToken, result: { summary: 'short' } });
  const done = await tm.transitionTask({ taskId: claimed.id, to: 'completed', actor: OPERATOR, reason: 'looks right' });
  try {
    await tm.transitionTask({ taskId: claimed.id, to: 'failed', actor: { id: 'summariser', role: 'agent' }, claimToken: claimed.claimToken });
    throw new Error('a stale claim token was accepted');
  } catch (err) {
    if (!(err instanceof EngineError) || (err.code !== 'STALE_CLAIM' && err.code !== 'INVALID_TRANSITION')) throw err;
  }
  await runs.unregisterDaemon(me);

  const events = (await tm.getTask(task.id)).events.map((e) => e.type);
  if (done.state !== 'completed' || !events.includes('task.claimed')) throw new Error(`unexpected: ${done.state} ${events.join(',')}`);
  await store.close();
  console.log(`ok store: task ${task.id} ${done.state}; events ${events.join(', ')}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
