/**
 * What only the PostgreSQL store has to prove: claims across processes with SKIP LOCKED,
 * migrations raced by many processes, the database's clock over a machine's, faults named.
 */
import { type ChildProcess, execFile, fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { createPgStore } from '../../src/engine/postgres/task-store.js';
import { PG_MIGRATIONS } from '../../src/engine/postgres/migrations.js';
import { ROOT, codeOf, freshManager, operator, tempDir } from '../helpers.js';
import { newDatabase, openTaskStore } from '../stores.js';
import { sql } from './sql.js';

const run = promisify(execFile);


interface DrainResult {
  completed: number[];
  errors: string[];
}

function drain(db: string, threads: number): { child: ChildProcess; result: Promise<DrainResult>; ready: Promise<void> } {
  const child = fork(join(ROOT, 'test/fixtures/drain.mjs'), [db, String(threads)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  onTestFinished(() => void child.kill('SIGKILL'));
  let onReady!: () => void;
  const ready = new Promise<void>((r) => (onReady = r));
  const result = new Promise<DrainResult>((resolve, reject) => {
    child.on('message', (m: { type: string } & DrainResult) => {
      if (m.type === 'ready') onReady();
      if (m.type === 'result') resolve(m);
    });
    child.on('exit', (code, signal) => reject(new Error(`drain exited ${code ?? signal} before reporting`)));
  });
  return { child, result, ready };
}

describe('the PostgreSQL store', () => {
  it('4 processes x 2 threads claim 2,000 tasks with SKIP LOCKED: each completed exactly once, every move has its event', async () => {
    const tm = freshManager();
    for (let i = 0; i < 2000; i += 500) await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `t${i + j}` })), operator);
    const drains = Array.from({ length: 4 }, () => drain(tm.path, 2));
    await Promise.all(drains.map((d) => d.ready));
    for (const d of drains) d.child.send({ type: 'go' });
    const results = await Promise.all(drains.map((d) => d.result));
    expect(results.flatMap((r) => r.errors)).toEqual([]);
    const completed = results.flatMap((r) => r.completed).sort((a, b) => a - b);
    expect(completed).toHaveLength(2000);
    expect(new Set(completed).size).toBe(2000);
    // Every process got work: SKIP LOCKED lets claimers pass each other's rows.
    for (const r of results) expect(r.completed.length).toBeGreaterThan(0);
    const [counts] = await sql<{ claimed: number; done: number }>(
      tm.path,
      "SELECT count(*) FILTER (WHERE type = 'task.claimed')::int AS claimed, count(*) FILTER (WHERE data::jsonb->>'to' = 'completed')::int AS done FROM task_events",
    );
    expect(counts).toEqual({ claimed: 2000, done: 2000 });
    expect((await tm.stats()).byState.completed).toBe(2000);
  });

  it('six processes migrating a new schema at once: each step applied once, every process opens it', async () => {
    const url = newDatabase(tempDir());
    const script = join(tempDir(), 'open.mjs');
    writeFileSync(
      script,
      `import { createPgStore } from ${JSON.stringify(join(ROOT, 'dist/engine/postgres/task-store.js'))};
       const s = createPgStore({ url: process.argv[2] });
       const info = await s.info(); await s.close(); process.stdout.write(String(info.schemaVersion));`,
    );
    const outs = await Promise.all(Array.from({ length: 6 }, () => run(process.execPath, [script, url])));
    expect(outs.map((o) => o.stdout)).toEqual(Array(6).fill(String(PG_MIGRATIONS.length)));
    expect(await sql(url, 'SELECT version FROM schema_version')).toEqual([{ version: PG_MIGRATIONS.length }]);
  });

  it('a schema newer than this taskloop is refused STORE_TOO_NEW, and nothing is written', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'one' }, operator);
    await sql(tm.path, 'UPDATE schema_version SET version = 99');
    const newer = createTaskManager({ store: openTaskStore(tm.path) });
    onTestFinished(() => newer.close());
    expect(await codeOf(newer.createTask({ title: 'two' }, operator))).toBe('STORE_TOO_NEW');
    expect(await sql(tm.path, 'SELECT count(*)::int AS n FROM tasks')).toEqual([{ n: 1 }]);
  });

  it('times come from the database: a process whose clock is an hour fast writes the server’s time', async () => {
    const url = newDatabase(tempDir());
    const dir = tempDir();
    const skew = join(dir, 'skew.mjs');
    writeFileSync(skew, 'const real = Date.now; Date.now = () => real() + 3_600_000;\n');
    const script = join(dir, 'claim.mjs');
    writeFileSync(
      script,
      `import { createTaskManager } from ${JSON.stringify(join(ROOT, 'dist/engine/index.js'))};
       import { createPgStore } from ${JSON.stringify(join(ROOT, 'dist/engine/postgres/task-store.js'))};
       const tm = createTaskManager({ store: createPgStore({ url: process.argv[2] }) });
       const { task } = await tm.createTask({ title: 't' }, { id: 'operator', role: 'operator' });
       const c = await tm.claimTask({ agent: 'a', leaseMs: 60000 });
       await tm.close();
       process.stdout.write(JSON.stringify({ createdAt: task.createdAt, lease: c.leaseExpiresAt, local: Date.now() }));`,
    );
    const { stdout } = await run(process.execPath, ['--import', skew, script, url]);
    const out = JSON.parse(stdout) as { createdAt: number; lease: number; local: number };
    const [db] = await sql<{ now: number }>(url, 'SELECT (extract(epoch from clock_timestamp()) * 1000)::float8 AS now');
    expect(out.local - db!.now).toBeGreaterThan(3_000_000); // the process's clock is off…
    expect(Math.abs(db!.now - out.createdAt)).toBeLessThan(60_000); // …and the rows are not
    expect(out.lease - out.createdAt).toBeGreaterThanOrEqual(60_000);
    expect(out.lease - out.createdAt).toBeLessThan(120_000);
  });

  it('faults: a bad URL is VALIDATION_FAILED before connecting; a server that is not there is STORE_UNAVAILABLE', async () => {
    expect(() => createPgStore({ url: 'postgres://u@localhost/db?schema=Robert;DROP' })).toThrow(/schema/);
    expect(() => createPgStore({ url: 'postgres://u@localhost/db?wakeups=sometimes' })).toThrow(/wakeups/);
    const gone = createPgStore({ url: 'postgres://nobody:secret@127.0.0.1:1/none' });
    onTestFinished(() => gone.close());
    const tm = createTaskManager({ store: gone });
    let message = '';
    expect(
      await codeOf(
        tm.createTask({ title: 't' }, operator).catch((err: Error) => {
          message = err.message;
          throw err;
        }),
      ),
    ).toBe('STORE_UNAVAILABLE');
    expect(message).not.toContain('secret');
    expect(message.split('\n')).toHaveLength(1);
  });

  it('info names the server, the schema version and what this store can do', async () => {
    const tm = freshManager();
    const info = await tm.store.info();
    expect(info).toMatchObject({
      kind: 'postgres',
      schemaVersion: PG_MIGRATIONS.length,
      knownSchemaVersion: PG_MIGRATIONS.length,
      capabilities: { multipleHosts: true, pidLiveness: false, pushWakeups: true, skipLocked: true },
    });
    expect(info.version).toMatch(/^PostgreSQL \d+/);
    expect(info.location).not.toContain(`:${new URL(tm.path).password}@`); // no password
  });
});
