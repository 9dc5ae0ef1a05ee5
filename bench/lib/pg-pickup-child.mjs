/**
 * The two roles of the pickup scenario (forked by pg-pickup.mjs). argv: one JSON object.
 * - consumer { role, url, schema, agent }: waits with `store.watch` (LISTEN/NOTIFY); on each
 *   wake-up claims (start) until a claim finds nothing, stamps each claim's call and return,
 *   and completes the task (review → completed, untimed) beside its next claim, as a worker would.
 * - producer { role, url, schema, count, warm, gapMs }: on `go`, creates warm + count tasks
 *   on a fixed 5 ms schedule, each stamped just before its createTask call (in its card) and
 *   again when the call returned (reported to the parent).
 * With `floor: true` both sides are bare `pg` instead (pickup's floor on this machine): the
 * producer INSERTs a job and NOTIFYs in one autocommit statement, the consumer LISTENs on its
 * own connection, claims with one SKIP LOCKED UPDATE and completes with another.
 * Both stamp with `performance.timeOrigin + performance.now()`: wall-clock ms with µs
 * resolution, comparable across processes on one host (the parent checks the offset with
 * pings: `ping` → `pong` with the child's clock).
 */
import pg from 'pg';
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { schemaUrl } from './pg-server.mjs';

export const clock = () => performance.timeOrigin + performance.now();
const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });
const ACCEPTANCE = Object.freeze({ id: 'acceptance', role: 'system' });

const config = JSON.parse(process.argv[2] ?? '{}');

/** What the roles need of a side: taskloop's manager, or bare pg (the floor). */
async function openSide() {
  if (config.floor !== true) {
    const manager = createTaskManager({ store: createPgStore({ url: schemaUrl(config.url, config.schema) }) });
    await manager.store.ready;
    return {
      watch: (fn) => manager.store.watch(fn, 'work'),
      claim: (agent) => manager.claimTask({ agent, start: true }).then((t) => t && { card: t.card, id: t.id, token: t.claimToken }),
      complete: (agent, t) =>
        manager.transitionTask({ taskId: t.id, to: 'review', actor: { id: agent, role: 'agent' }, claimToken: t.token, then: [{ to: 'completed', actor: ACCEPTANCE }] }),
      create: (i, card) => manager.createTask({ title: `pickup ${i}`, card }, OPERATOR),
      close: () => manager.close(),
    };
  }
  const options = `-c search_path=${config.schema}`;
  const pool = new pg.Pool({ connectionString: config.url, max: 2, options });
  const channel = `bench_${config.schema}`;
  let tokens = 0;
  let listener;
  return {
    watch(fn) {
      listener = new pg.Client({ connectionString: config.url, options });
      listener.on('notification', () => fn());
      return listener.connect().then(() => listener.query(`LISTEN ${channel}`));
    },
    async claim(agent) {
      const token = `${agent}:${++tokens}`;
      const { rows } = await pool.query(
        `UPDATE jobs SET state = 'running', token = $1 WHERE id = (SELECT id FROM jobs WHERE state = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, payload`,
        [token],
      );
      return rows[0] === undefined ? null : { id: rows[0].id, card: JSON.parse(rows[0].payload), token };
    },
    complete: (_, t) => pool.query("UPDATE jobs SET state = 'completed', token = NULL WHERE id = $1 AND token = $2", [t.id, t.token]),
    create: (_, card) => pool.query(`WITH i AS (INSERT INTO jobs (state, payload) VALUES ('pending', $1) RETURNING id) SELECT pg_notify('${channel}', '') FROM i`, [JSON.stringify(card)]),
    async close() {
      await listener?.end();
      await pool.end();
    },
  };
}
const side = config.role ? await openSide() : undefined;

const handlers = {
  ping: (m) => process.send({ type: 'pong', id: m.id, clock: clock() }),
  exit: async () => {
    await side.close();
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
    const done = side.complete(agent, task).finally(() => completing.delete(done));
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
          const task = await side.claim(agent);
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
  await side.watch(() => void wake());
  handlers.report = async () => {
    await Promise.all([...completing]);
    process.send({ type: 'done', samples, claims, empty });
  };
  process.send({ type: 'ready' });
} else if (config.role === 'producer') {
  handlers.go = async () => {
    const total = config.warm + config.count;
    const created = []; // [n, createTask called, createTask returned]
    const start = clock() + 20;
    for (let i = 0; i < total; i++) {
      const due = start + i * config.gapMs;
      const wait = due - clock();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const stamp = clock();
      await side.create(i, { goal: 'pickup', n: i, stamp, warm: i < config.warm });
      if (i >= config.warm) created.push([i, stamp, clock()]);
    }
    process.send({ type: 'done', created });
  };
  process.send({ type: 'ready' });
}

process.on('message', (m) => void handlers[m?.type]?.(m));
