/**
 * The LISTEN connection of a PostgreSQL store (postgres/watch.ts) and its channels per queue:
 * a claimer's key LISTENed late still hears a create made meanwhile, the log's followers hear
 * creates by NOTIFY, another schema's channels never wake this one's claimers, and a dropped
 * LISTEN connection comes back without waiting for the slow poll. The stores' slow poll and
 * the workers' idle naps are an hour, so only a NOTIFY (or the watcher's own wake-up once a
 * LISTEN lands) can wake them. (From the hostile review of session 14: each case failed on
 * the first version of the channels per queue.)
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { wakeBucket } from '../../src/engine/claims.js';
import { createTaskManager } from '../../src/engine/index.js';
import { createPgRunStore } from '../../src/engine/postgres/run-store.js';
import { type PgTaskStore, createPgStore } from '../../src/engine/postgres/task-store.js';
import { createWorker } from '../../src/workers/create-worker.js';
import { operator, tempDir } from '../helpers.js';
import { newDatabase } from '../stores.js';
import { counter } from '../wake-helpers.js';

const HOUR = 3_600_000;
const schemaOf = (url: string) => new URL(url).searchParams.get('schema')!;

function pgStore(url: string, pollMs = HOUR): PgTaskStore {
  const s = createPgStore({ url, pollMs });
  onTestFinished(() => s.close());
  return s;
}
async function admin(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: inject('pgUrl') });
  await c.connect();
  onTestFinished(() => c.end());
  return c;
}
/** A URL on a schema of our own naming, dropped when the test finishes. */
function urlOn(schema: string): string {
  const base = inject('pgUrl');
  onTestFinished(async () => {
    const c = new pg.Client({ connectionString: base });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).finally(() => c.end());
  });
  return `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`;
}
/** The backends LISTENing for `schema` (a watcher's connection's last statement is its LISTEN). */
async function listeners(a: pg.Client, schema: string): Promise<Array<{ pid: number; query: string }>> {
  const like = `LISTEN taskloop\\_${schema.replace(/_/g, '\\_')}%`;
  return (await a.query<{ pid: number; query: string }>('SELECT pid, query FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()', [like])).rows;
}
async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000, step = 5): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(step);
  }
}
/** How long `check` took to hold (ms), or undefined after `ms`. */
async function within(check: () => boolean, ms: number): Promise<number | undefined> {
  const start = performance.now();
  while (!check()) {
    if (performance.now() - start > ms) return undefined;
    await sleep(1);
  }
  return performance.now() - start;
}
/** A createWorker of `queue` on `store` that naps an hour: only a wake-up makes it look. */
async function worker(store: PgTaskStore, queue: string) {
  const tm = createTaskManager({ store });
  const started = new Set<number>();
  const looks: number[] = [];
  const claimable = store.claimable.bind(store);
  store.claimable = async (input) => {
    const r = await claimable(input);
    looks.push(performance.now());
    return r;
  };
  const w = await createWorker({
    store: { tm, runs: createPgRunStore(store) },
    queue,
    agent: 'w1',
    idleMs: HOUR,
    deadCheckMs: HOUR,
    sweepMs: 0,
    log: () => undefined,
    handler: async (t) => void started.add(t.id),
  });
  onTestFinished(() => w.close(100));
  return { started, looks };
}
/** Delays the statements of `store`'s LISTEN connections that `match` by `ms` (a slow server or network). */
function slowListens(store: PgTaskStore, match: (text: string) => boolean, ms: number): void {
  const conn = store.conn as { dedicated: () => Promise<pg.Client> };
  const dedicated = conn.dedicated.bind(conn);
  conn.dedicated = async () => {
    const c = await dedicated();
    const query = c.query.bind(c) as (...a: unknown[]) => Promise<unknown>;
    (c as unknown as { query: unknown }).query = (text: unknown, ...rest: unknown[]) =>
      typeof text === 'string' && match(text) ? sleep(ms).then(() => query(text, ...rest)) : query(text, ...rest);
    return c;
  };
}

describe('the LISTEN connection and its channels per queue', () => {
  it('a key LISTENed on a connection already up: a create committed before its LISTEN lands still wakes the claimer', async () => {
    const url = newDatabase(tempDir());
    const schema = schemaOf(url);
    const a = await admin();
    const writer = createTaskManager({ store: pgStore(url) });
    const store = pgStore(url);
    // Only a key added to a connection already up is LISTENed on its own ($w now, _w before).
    slowListens(store, (t) => t.startsWith(`LISTEN taskloop_${schema}$w`) || t.startsWith(`LISTEN taskloop_${schema}_w`), 400);
    store.watch(() => undefined, 'work', 'mail');
    await until('the LISTEN connection', async () => (await listeners(a, schema)).length === 1);
    const w = await worker(store, 'jobs');
    await until('the worker’s first look', () => w.looks.length >= 1);
    const { task } = await writer.createTask({ title: 'before the LISTEN lands', queue: 'jobs' }, operator);
    expect(await within(() => w.started.has(task.id), 2500), 'picked up once the LISTEN landed').toBeDefined();
  });

  it('the log’s followers hear a create by NOTIFY, not by their 100 ms poll', async () => {
    const url = newDatabase(tempDir());
    const schema = schemaOf(url);
    const a = await admin();
    const writer = createTaskManager({ store: pgStore(url) });
    const store = pgStore(url);
    const f = counter();
    store.watch(f.hit);
    await until('the LISTEN connection', async () => (await listeners(a, schema)).length === 1);
    await sleep(300);
    const took: number[] = [];
    for (let i = 0; i < 10; i++) {
      const n = f.n;
      const t0 = performance.now();
      await writer.createTask({ title: `c${i}`, queue: 'jobs' }, operator);
      await until('the follower woken', () => f.n > n, 2000, 1);
      took.push(f.at[f.at.length - 1]! - t0);
      await sleep(Math.random() * 100);
    }
    took.sort((x, y) => x - y);
    // The follow poll alone would put the median near 50 ms.
    expect(took[5]!, `follower woken after a create: ${took.map((t) => t.toFixed(1)).join(', ')} ms`).toBeLessThan(25);
  });

  it('another schema’s channels never wake this one’s claimers (schemas named <s>_wany, <s>_w<bucket>)', async () => {
    const s = `wc_${randomBytes(4).toString('hex')}`;
    const b = wakeBucket('mail');
    const onS = createTaskManager({ store: pgStore(urlOn(s)) });
    await onS.createTask({ title: 'migrate', queue: 'x' }, operator);
    const a = await admin();
    const counts: Array<{ n: number }> = [];
    for (const other of [`${s}_wany`, `${s}_w${b}`]) {
      const store = pgStore(urlOn(other));
      await store.ready;
      const c = counter();
      store.watch(c.hit, 'work', 'jobs');
      counts.push(c);
      await until(`${other} LISTENing`, async () => (await listeners(a, other)).length === 1);
    }
    await sleep(300);
    const before = counts.map((c) => c.n);
    for (let i = 0; i < 5; i++) await onS.createTask({ title: `letter ${i}`, queue: 'mail' }, operator);
    await sleep(500);
    expect(counts.map((c) => c.n)).toEqual(before);
  });

  it('a dropped LISTEN connection comes back in a moment, every key LISTENed again, without the slow poll', async () => {
    const url = newDatabase(tempDir());
    const schema = schemaOf(url);
    const a = await admin();
    const writer = createTaskManager({ store: pgStore(url) });
    const store = pgStore(url);
    const w = await worker(store, 'jobs');
    const jobs = `$w${wakeBucket('jobs')}`;
    await until('LISTENing', async () => (await listeners(a, schema)).some((l) => l.query.includes(jobs)));
    const [l] = await listeners(a, schema);
    await a.query('SELECT pg_terminate_backend($1)', [l!.pid]);
    await sleep(100);
    const { task } = await writer.createTask({ title: 'during the gap', queue: 'jobs' }, operator);
    expect(await within(() => w.started.has(task.id), 2500), 'picked up after the reconnect').toBeDefined();
    await until('LISTENing again', async () => (await listeners(a, schema)).some((x) => x.pid !== l!.pid && x.query.includes(jobs)));
  });

  it('a drop reported as the LISTEN answers does not leave a dead connection in use, and another opens without the slow poll', async () => {
    const url = newDatabase(tempDir());
    const schema = schemaOf(url);
    const a = await admin();
    const writer = createTaskManager({ store: pgStore(url) });
    // The slow poll is an hour, so a pickup can only come by NOTIFY: the window below
    // can be generous for a loaded machine without letting a poll pass for a NOTIFY.
    const store = pgStore(url);
    // The server's FATAL read with the LISTEN's ReadyForQuery: 'error' comes before the
    // awaiting code resumes. Emulated on the first LISTEN connection.
    const conn = store.conn as { dedicated: () => Promise<pg.Client> };
    const dedicated = conn.dedicated.bind(conn);
    let firstPid: number | undefined;
    conn.dedicated = async () => {
      const c = await dedicated();
      if (firstPid !== undefined) return c;
      firstPid = -1;
      const query = c.query.bind(c) as (...x: unknown[]) => Promise<unknown>;
      (c as unknown as { query: unknown }).query = (text: unknown, ...rest: unknown[]) => {
        const p = query(text, ...rest);
        if (typeof text !== 'string' || !text.startsWith(`LISTEN taskloop_${schema};`)) return p;
        return p.then((r) => {
          firstPid = (c as unknown as { processID: number }).processID;
          c.emit('error', new Error('terminating connection due to administrator command'));
          void a.query('SELECT pg_terminate_backend($1)', [firstPid]);
          return r;
        });
      };
      return c;
    };
    const w = await worker(store, 'jobs');
    const jobs = `$w${wakeBucket('jobs')}`;
    await until('another LISTEN connection, with the worker’s key', async () => (await listeners(a, schema)).some((l) => l.pid !== firstPid && l.query.includes(jobs)), 5000);
    await sleep(300);
    const { task } = await writer.createTask({ title: 'after the drop', queue: 'jobs' }, operator);
    expect(await within(() => w.started.has(task.id), 3000), 'picked up by NOTIFY on the new connection').toBeDefined();
  });
});
