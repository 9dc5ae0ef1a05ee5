/**
 * Round trips per operation, counted rather than read off the code: `pg.Client#query` is
 * wrapped (in this process only) to count calls and keep their first words. node-postgres
 * sends one query at a time and waits for its ReadyForQuery, so one call is one round trip
 * (a multi-statement simple query such as `BEGIN; SELECT …` is one). Pool checkouts of an
 * idle connection are not round trips; the store is warmed first so none connects here.
 */
import pg from 'pg';
import { createTaskManager } from '../../dist/engine/index.js';
import { createPgStore } from '../../dist/engine/postgres/task-store.js';
import { schemaUrl } from './pg-server.mjs';
import { drainOne } from './pg-worker.mjs';

const OPERATOR = Object.freeze({ id: 'operator', role: 'operator' });

function tap() {
  const calls = [];
  const original = pg.Client.prototype.query;
  // A call made while the same client still waits for an answer rides in that round trip
  // (the store's pool pipelines a transaction's last write and its COMMIT): it is not counted.
  const waiting = new WeakMap();
  pg.Client.prototype.query = function (text, ...rest) {
    const sql = typeof text === 'string' ? text : (text?.text ?? '?');
    const inFlight = waiting.get(this) ?? 0;
    if (inFlight === 0) calls.push(sql.replace(/\s+/g, ' ').trim());
    else calls[calls.length - 1] += ` + ${sql.replace(/\s+/g, ' ').trim()}`;
    const result = original.call(this, text, ...rest);
    if (result instanceof Promise) {
      waiting.set(this, inFlight + 1);
      const done = () => waiting.set(this, (waiting.get(this) ?? 1) - 1);
      result.then(done, done);
    }
    return result;
  };
  return { calls, restore: () => (pg.Client.prototype.query = original) };
}

const short = (sql) => {
  const s = sql.replace(/\$\d+/g, '?');
  if (/ \+ (NOTIFY .*; )?COMMIT$/.test(s)) return `${short(s.replace(/ \+ (NOTIFY .*; )?COMMIT$/, ''))} + ${/ \+ NOTIFY/.test(s) ? 'NOTIFY; ' : ''}COMMIT`;
  if (/^BEGIN; SELECT/.test(s)) return 'BEGIN; SELECT now';
  if (/FOR UPDATE SKIP LOCKED/.test(s)) return 'SELECT * … FOR UPDATE SKIP LOCKED';
  if (/^SELECT \* FROM tasks WHERE id = \? FOR UPDATE/.test(s)) return 'SELECT * … FOR UPDATE (lock row)';
  if (/^INSERT INTO task_events/.test(s)) return 'INSERT task_events';
  if (/^WITH w0 AS \(UPDATE tasks/.test(s)) return 'UPDATE tasks + INSERT task_events';
  if (/^INSERT INTO tasks/.test(s)) return 'INSERT tasks';
  if (/^UPDATE tasks SET unmet_deps/.test(s)) return 'UPDATE dependents';
  if (/^UPDATE tasks SET last_event_id/.test(s)) return 'UPDATE last_event_id';
  if (/^UPDATE tasks/.test(s)) return 'UPDATE tasks';
  if (/COMMIT/.test(s)) return s.startsWith('NOTIFY') ? 'NOTIFY; COMMIT' : 'COMMIT';
  return s.slice(0, 40);
};

/** Counts the round trips of createTask, claimTask({start}) and the review→completed transition. */
export async function countRoundTrips(url, schema, ops = 50) {
  const manager = createTaskManager({ store: createPgStore({ url: schemaUrl(url, schema), poolSize: 1 }) });
  try {
    await manager.store.ready;
    await manager.createTask({ title: 'warm', card: {} }, OPERATOR); // connects
    await drainOne(manager, 'agent-1');
    const t = tap();
    const measure = async (fn) => {
      t.calls.length = 0;
      for (let i = 0; i < ops; i++) await fn(i);
      const perOp = t.calls.length / ops;
      return { perOp, sequence: t.calls.slice(0, Math.round(perOp)).map(short) };
    };
    try {
      const create = await measure((i) => manager.createTask({ title: `trip ${i}`, card: { n: i } }, OPERATOR));
      const claims = [];
      const claim = await measure(async () => claims.push(await manager.claimTask({ agent: 'agent-1', start: true })));
      const transition = await measure((i) =>
        manager.transitionTask({
          taskId: claims[i].id,
          to: 'review',
          actor: { id: 'agent-1', role: 'agent' },
          claimToken: claims[i].claimToken,
          then: [{ to: 'completed', actor: { id: 'acceptance', role: 'system' } }],
        }),
      );
      const empty = await measure(() => manager.claimTask({ agent: 'agent-1', start: true }));
      return { create, claim, transition, empty };
    } finally {
      t.restore();
    }
  } finally {
    await manager.close();
  }
}
