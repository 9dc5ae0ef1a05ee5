/**
 * The two roles of the pickup scenario (forked by pg-pickup.mjs). argv: one JSON object.
 * - consumer { role, url, schema, agent }: waits with `store.watch` (LISTEN/NOTIFY); on each
 *   wake-up claims (start) until a claim finds nothing, stamps each claim's call and return,
 *   and completes the task (review → completed, untimed) beside its next claim, as a worker would.
 * - producer { role, url, schema, count, warm, gapMs }: on `go`, creates warm + count tasks
 *   on a fixed 5 ms schedule, each stamped just before its createTask call (in its card) and
 *   again when the call returned (reported to the parent).
 * Both stamp with `performance.timeOrigin + performance.now()`: wall-clock ms with µs
 * resolution, comparable across processes on one host (the parent checks the offset with
 * pings: `ping` → `pong` with the child's clock).
 */
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { schemaUrl } from './pg-server.mjs';

export const clock = () => performance.timeOrigin + performance.now();
const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
const ACCEPTANCE = Object.freeze({ id: 'acceptance', role: 'system' });

const config = JSON.parse(process.argv[2] ?? '{}');
const manager = config.role ? createTaskManager({ store: createPgStore({ url: schemaUrl(config.url, config.schema) }) }) : undefined;

const handlers = {
  ping: (m) => process.send({ type: 'pong', id: m.id, clock: clock() }),
  exit: async () => {
    await manager.close();
    process.exit(0);
  },
};

if (config.role === 'consumer') {
  const { agent } = config;
  const samples = []; // [n, warm, claim called, claim returned]
  const completing = new Set();
  let claims = 0;
  let empty = 0;
  let running = false;
  let again = false;
  // The completion runs beside the next claim (the pool has 2 connections), as a worker's would.
  const complete = (task) => {
    const done = manager
      .transitionTask({
        taskId: task.id,
        to: 'review',
        actor: { id: agent, role: 'agent' },
        claimToken: task.claimToken,
        then: [{ to: 'completed', actor: ACCEPTANCE }],
      })
      .finally(() => completing.delete(done));
    completing.add(done);
  };
  const wake = async () => {
    if (running) return void (again = true);
    running = true;
    try {
      do {
        again = false;
        for (;;) {
          const called = clock();
          const task = await manager.claimTask({ agent, start: true });
          const at = clock();
          if (task === null) {
            empty++;
            break;
          }
          claims++;
          samples.push([task.card.n, task.card.warm === true, called, at]);
          complete(task);
        }
      } while (again);
    } catch (err) {
      console.error(`consumer ${agent}: ${err.stack ?? err}`);
      process.exit(1);
    } finally {
      running = false;
    }
  };
  await manager.store.ready;
  manager.store.watch(() => void wake(), 'work');
  handlers.report = async () => {
    await Promise.all([...completing]);
    process.send({ type: 'done', samples, claims, empty });
  };
  process.send({ type: 'ready' });
} else if (config.role === 'producer') {
  await manager.store.ready;
  handlers.go = async () => {
    const total = config.warm + config.count;
    const created = []; // [n, createTask called, createTask returned]
    const start = clock() + 20;
    for (let i = 0; i < total; i++) {
      const due = start + i * config.gapMs;
      const wait = due - clock();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const stamp = clock();
      await manager.createTask({ title: `pickup ${i}`, card: { goal: 'pickup', n: i, stamp, warm: i < config.warm } }, OPERATOR);
      if (i >= config.warm) created.push([i, stamp, clock()]);
    }
    process.send({ type: 'done', created });
  };
  process.send({ type: 'ready' });
}

process.on('message', (m) => void handlers[m?.type]?.(m));
