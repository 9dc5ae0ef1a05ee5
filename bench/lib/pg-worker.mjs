/**
 * A drain process of the pg benchmark (forked by pg-drain.mjs). argv: one JSON object
 * { kind: 'taskloop' | 'floor' | 'floor-notify' | 'floor-1tx' | 'pgboss', url, schema, loops, agent }.
 * It connects, reports `ready`, waits for `go`, then runs `loops` concurrent async loops,
 * each taking one job after another until a take finds nothing, and reports `done` with
 * its count and the CPU ms it used from `go` to then. Every loop has its own connection:
 * the pool holds `loops` of them.
 */
import pg from 'pg';
import PgBoss from 'pg-boss';
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { schemaUrl } from './pg-server.mjs';

export const ACCEPTANCE = Object.freeze({ id: 'acceptance', role: 'system' });
export const BOSS_QUEUE = 'bench';

/** One task through claim(start) → review → completed, as the queue benchmark's drainOne. */
export async function drainOne(manager, agent) {
  const task = await manager.claimTask({ agent, start: true });
  if (task === null) return false;
  await manager.transitionTask({
    taskId: task.id,
    to: 'review',
    actor: { id: agent, role: 'agent' },
    claimToken: task.claimToken,
    then: [{ to: 'completed', actor: ACCEPTANCE }],
  });
  return true;
}

const PICK = "SELECT id FROM jobs WHERE state = 'pending' ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED";

/** Opens what `kind` drains with; returns { takeOne(loop) → bool, close }. */
async function open({ kind, url, schema, loops, agent }) {
  if (kind === 'taskloop') {
    const manager = createTaskManager({ store: createPgStore({ url: schemaUrl(url, schema), poolSize: loops }) });
    await manager.store.ready;
    return { takeOne: () => drainOne(manager, agent), close: () => manager.close() };
  }
  if (kind === 'floor' || kind === 'floor-notify') {
    // Two commits per job, as any queue whose claim outlives a crash: the claim (SKIP LOCKED
    // pick, token and lease, in one statement) and the completion fenced by that token.
    const pool = new pg.Pool({ connectionString: url, max: loops, options: `-c search_path=${schema}` });
    const notify = kind === 'floor-notify' ? `, pg_notify('bench_${schema}', '')` : '';
    let tokens = 0;
    return {
      async takeOne() {
        const token = `${agent}:${++tokens}`;
        const { rows } = await pool.query(
          `WITH c AS (UPDATE jobs SET state = 'running', token = $1, lease_until = now() + interval '30 seconds'
             WHERE id = (${PICK}) RETURNING id) SELECT id${notify} FROM c`,
          [token],
        );
        if (rows.length === 0) return false;
        const done = await pool.query(`WITH c AS (UPDATE jobs SET state = 'done', token = NULL WHERE id = $1 AND token = $2 RETURNING id) SELECT id${notify} FROM c`, [rows[0].id, token]);
        if (done.rows.length !== 1) throw new Error(`floor: job ${rows[0].id} lost its claim`);
        return true;
      },
      close: () => pool.end(),
    };
  }
  if (kind === 'floor-1tx') {
    // A diagnostic: the job claimed and marked done in one transaction (one commit), as a
    // queue that holds a row lock for the whole of the work would.
    const pool = new pg.Pool({ connectionString: url, max: loops, options: `-c search_path=${schema}` });
    const clients = await Promise.all(Array.from({ length: loops }, () => pool.connect()));
    return {
      async takeOne(loop) {
        const c = clients[loop];
        await c.query('BEGIN');
        const { rows } = await c.query(PICK);
        if (rows.length === 0) {
          await c.query('COMMIT');
          return false;
        }
        await c.query("UPDATE jobs SET state = 'done' WHERE id = $1", [rows[0].id]);
        await c.query('COMMIT');
        return true;
      },
      async close() {
        for (const c of clients) c.release();
        await pool.end();
      },
    };
  }
  if (kind === 'pgboss') {
    const boss = new PgBoss({ connectionString: url, schema, max: loops, migrate: false, supervise: false, schedule: false });
    boss.on('error', (err) => console.error(`pg-boss: ${err.message}`));
    await boss.start();
    return {
      async takeOne() {
        const [job] = await boss.fetch(BOSS_QUEUE);
        if (job === undefined) return false;
        await boss.complete(BOSS_QUEUE, job.id);
        return true;
      },
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  }
  throw new Error(`unknown kind ${kind}`);
}

const config = JSON.parse(process.argv[2] ?? '{}');
if (config.kind !== undefined) {
  const side = await open(config);
  process.once('message', async (msg) => {
    if (msg?.type !== 'go') throw new Error(`worker ${config.agent}: unexpected message ${JSON.stringify(msg)}`);
    const cpu0 = process.cpuUsage();
    const perLoop = await Promise.all(
      Array.from({ length: config.loops }, async (_, loop) => {
        let n = 0;
        while (await side.takeOne(loop)) n++;
        return n;
      }),
    );
    const count = perLoop.reduce((a, b) => a + b, 0);
    const { user, system } = process.cpuUsage(cpu0);
    process.send({ type: 'done', count, perLoop, cpuMs: (user + system) / 1000 }, async () => {
      await side.close();
      process.exit(0);
    });
  });
  process.send({ type: 'ready' });
}
