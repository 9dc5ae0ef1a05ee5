/**
 * Recovery of a killed daemon's run on another "host" (issue 13): two daemon processes with
 * distinct TASKLOOP_HOST on one server, the victim in the middle of a 60 s `wait`, the peer
 * idle; the victim is killed with SIGKILL, and the clock runs from the kill to the peer's
 * `run.resumed` of that run (the same run, resumed from its checkpoint). Between them: the
 * peer finding the victim silent for --dead-after (default 4 s, counted from the victim's
 * last beat, which came up to a third of that before the kill), its reclaim (the task back to
 * pending, with NOTIFY), and its claim. One fresh schema per round.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { startDaemonProcess, waitFor } from './loop-daemon.mjs';
import { adminQuery, schemaUrl } from './pg-server.mjs';
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';

const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
const CARD = {
  goal: 'recovery benchmark',
  planner: 'scripted',
  allowed_tools: ['wait'],
  budget: { max_steps: 10 },
  acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] },
  script: [{ action: 'tool', tool: 'wait', args: { ms: 60_000 } }, { action: 'done' }],
};

async function round(url, schema, deadAfter) {
  const db = schemaUrl(url, schema);
  const manager = createTaskManager({ store: createPgStore({ url: db }) });
  const daemons = [];
  try {
    const { task } = await manager.createTask({ title: 'survive a kill', card: CARD }, OPERATOR);
    const args = deadAfter === undefined ? [] : ['--dead-after', deadAfter];
    const victim = await startDaemonProcess(db, 1, args, { TASKLOOP_HOST: 'host-victim' });
    daemons.push(victim);
    const q = (sql) => adminQuery(url, sql, [], schema);
    await waitFor(async () => (await q("SELECT 1 FROM steps WHERE tool = 'wait' AND status = 'started'")).length > 0, 30_000, 'the victim to start its wait', 20);
    const peer = await startDaemonProcess(db, 1, args, { TASKLOOP_HOST: 'host-peer' });
    daemons.push(peer);
    // A random moment in the victim's beat cycle, as a crash would come.
    await sleep(500 + Math.random() * 1500);
    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    await victim.exited;
    const at = (type) => async () => {
      const [row] = await q(`SELECT created_at FROM task_events WHERE task_id = ${task.id} AND type = '${type}' ORDER BY id DESC LIMIT 1`);
      return row === undefined ? undefined : Date.now();
    };
    const resumedAt = await waitFor(at('run.resumed'), 60_000, 'the run to resume on the peer', 5);
    const [reclaim] = await q(`SELECT created_at, data FROM task_events WHERE task_id = ${task.id} AND data LIKE '%no heartbeat%' ORDER BY id LIMIT 1`);
    const [resumed] = await q(`SELECT created_at FROM task_events WHERE task_id = ${task.id} AND type = 'run.resumed' ORDER BY id LIMIT 1`);
    const runs = (await q(`SELECT count(*)::int AS n FROM runs WHERE task_id = ${task.id}`))[0].n;
    if (runs !== 1) throw new Error(`recovery: ${runs} runs of the task, not one resumed run`);
    return {
      ms: resumedAt - killedAt,
      // In the server's clock: reclaim → resumed (the claim by the peer and its resume).
      claimMs: reclaim === undefined ? undefined : resumed.created_at - reclaim.created_at,
    };
  } finally {
    for (const d of daemons) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill('SIGKILL');
    await Promise.all(daemons.map((d) => d.exited));
    await manager.close();
  }
}

/** `rounds` kills; returns { samples: [{ ms, claimMs }], p50, max, deadAfter }. */
export async function benchRecovery(url, schemas, { deadAfter } = {}) {
  const samples = [];
  for (const schema of schemas) samples.push(await round(url, schema, deadAfter));
  const ms = samples.map((s) => s.ms).sort((a, b) => a - b);
  return { samples, p50: ms[Math.floor((ms.length - 1) / 2)], max: ms[ms.length - 1], min: ms[0], rounds: ms.length };
}
