// Your own handler (a LangGraph graph, an OpenAI Agents SDK run …) behind taskloop's queue:
// leases, heartbeats, fencing and dead-peer recovery come with createWorker.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OPERATOR, openStore } from 'taskloop';
import { createWorker } from 'taskloop/workers';

const dir = mkdtempSync(join(tmpdir(), 'taskloop-example-worker-'));
try {
  const store = await openStore({ path: join(dir, 'tasks.db') });
  const ids: number[] = [];
  for (const to of ['ada@example.invalid', 'bob@example.invalid', 'cy@example.invalid']) {
    const { task } = await store.tm.createTask({ title: `Welcome ${to}`, queue: 'emails', card: { to } }, OPERATOR);
    ids.push(task.id);
  }
  const worker = await createWorker({
    store,
    queue: 'emails',
    agent: 'mailer',
    concurrency: 2,
    leaseMs: 10_000,
    handler: async (task, ctx) => {
      if (ctx.signal.aborted) throw new Error('stopped');
      return { sent_to: task.card.to, subject: task.title };
    },
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const tasks = await Promise.all(ids.map((id) => store.tm.getTask(id)));
    if (tasks.every((t) => t.state === 'completed')) break;
    if (Date.now() > deadline) throw new Error(`not done: ${tasks.map((t) => t.state).join(', ')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await worker.close();
  const first = await store.tm.getTask(ids[0]!);
  await store.close();
  console.log(`ok worker: ${ids.length} tasks completed; first result ${JSON.stringify(first.result)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
