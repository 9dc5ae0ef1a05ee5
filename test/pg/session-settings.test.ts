/**
 * What a connection of taskloop's runs under, whatever the URL, the role or the database
 * ask for: its own schema alone on the search path, and READ COMMITTED, which the claims
 * (SKIP LOCKED, and the one-statement claim of the next task) are written for. A URL's
 * `options` add server settings; they cannot take those two away (`pg` lets a URL's options
 * replace the ones it is given, so connection.ts takes them out of the URL and sends its
 * own after them). Found by a review: under a default of REPEATABLE READ, claims racing for
 * the same rows failed with a raw 40001 from the one-statement claim.
 */
import { type AddressInfo, type Socket, connect, createServer } from 'node:net';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { createTaskManager, isEngineError } from '../../src/engine/index.js';
import { parsePgUrl } from '../../src/engine/postgres/connection.js';
import { EVENT_LOCK_CLASS, eventLockKey } from '../../src/engine/postgres/event-lock.js';
import { type PgTaskStore, createPgStore } from '../../src/engine/postgres/task-store.js';
import { operator, tempDir, waitFor } from '../helpers.js';
import { newDatabase } from '../stores.js';
import { admin, sql, withClient } from './sql.js';

/** A database of its own (so `public` is empty), dropped when the test finishes. */
async function freshDatabase(tag: string): Promise<URL> {
  const server = inject('pgUrl');
  const database = `${tag}_${process.pid}_${Date.now()}`;
  await admin(server, `CREATE DATABASE ${database}`);
  onTestFinished(() => admin(server, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).then(() => undefined));
  const url = new URL(server);
  url.pathname = `/${database}`;
  return url;
}

/**
 * A stand-in for a pooler that does not pass a client's startup `options` on: a TCP proxy
 * to the test server that takes `options` out of each connection's StartupMessage.
 */
async function optionsDroppingProxy(server: URL): Promise<{ port: number; dropped: () => number }> {
  let dropped = 0;
  const proxy = createServer((client: Socket) => {
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      if (head.length < 4 || head.length < head.readInt32BE(0)) return;
      client.off('data', onData);
      const length = head.readInt32BE(0);
      const fields = head.subarray(8, length - 1).toString('utf8').split('\0');
      const kept: string[] = [];
      for (let i = 0; i + 1 < fields.length; i += 2) {
        if (fields[i] === 'options') dropped++;
        else kept.push(fields[i]!, fields[i + 1]!);
      }
      const body = Buffer.from(`${kept.join('\0')}\0\0`, 'utf8');
      const startup = Buffer.alloc(8);
      startup.writeInt32BE(8 + body.length, 0);
      head.copy(startup, 4, 4, 8);
      const upstream = connect(Number(server.port), server.hostname, () => {
        upstream.write(Buffer.concat([startup, body, head.subarray(length)]));
        client.pipe(upstream);
        upstream.pipe(client);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      client.on('close', () => upstream.destroy());
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
  return { port: (proxy.address() as AddressInfo).port, dropped: () => dropped };
}

describe('the settings of taskloop’s connections', () => {
  it('a URL’s options are kept for the server but come out of the URL pg is given', () => {
    const location = parsePgUrl('postgres://u:p@h:5/d?schema=s1&options=-c%20statement_timeout%3D7s&application_name=x');
    expect(location.serverOptions).toBe('-c statement_timeout=7s');
    expect(location.connectionString).toBe('postgres://u:p@h:5/d?application_name=x');
    expect(parsePgUrl('postgres://u:p@h:5/d').serverOptions).toBe('');
  });

  it('a URL’s options must be settings only (-c name=value, --name=value), given once: anything else is VALIDATION_FAILED before connecting (found by a review: a raw error at each connection)', () => {
    const withOptions = (...values: string[]) => {
      const u = new URL('postgres://u:p@h:5/d');
      for (const v of values) u.searchParams.append('options', v);
      return u.toString();
    };
    for (const fine of ['-c statement_timeout=7s', '-cstatement_timeout=7s', '--statement_timeout=7s', '-c default_transaction_isolation=repeatable\\ read', ' -c a.b=1\t-c lock_timeout=2s ']) {
      expect(parsePgUrl(withOptions(fine)).serverOptions, fine).toBe(fine);
    }
    const refusals: Array<[string[], RegExp]> = [
      [['-c application_name=x\\'], /ends in a backslash/],
      [['\\'], /ends in a backslash/],
      [['-c search_path=public -c'], /'-c' is not one/],
      [['--'], /'--' is not one/],
      [['-d'], /'-d' is not one/],
      [['-D /tmp'], /'-D' is not one/],
      [['statement_timeout=5s'], /'statement_timeout=5s' is not one/],
      [['-c', '-c x=1'], /given 2 times/],
    ];
    for (const [values, why] of refusals) {
      let err: unknown;
      try {
        parsePgUrl(withOptions(...values));
      } catch (e) {
        err = e;
      }
      expect(isEngineError(err) && err.code, values.join(' | ')).toBe('VALIDATION_FAILED');
      expect((err as Error).message, values.join(' | ')).toMatch(why);
      expect((err as Error).message.split('\n')).toHaveLength(1);
    }
  });

  it('a schema named with a word PostgreSQL reserves is refused before connecting (it was a raw 42601 at the migration)', () => {
    for (const word of ['user', 'select', 'table', 'order', 'analyse', 'current_schema', 'join']) {
      let err: unknown;
      try {
        parsePgUrl(`postgres://u:p@h:5/d?schema=${word}`);
      } catch (e) {
        err = e;
      }
      expect(isEngineError(err) && err.code, word).toBe('VALIDATION_FAILED');
      expect((err as Error).message).toBe(`schema '${word}' is a word PostgreSQL reserves; choose another name`);
    }
    // Words PostgreSQL does not reserve stay names like any other.
    for (const word of ['users', 'tasks', 'int', 'between', 'schema', 'taskloop']) expect(parsePgUrl(`postgres://u:p@h:5/d?schema=${word}`).schema).toBe(word);
  });

  it('a URL asking for REPEATABLE READ and public on the path: stores opening it at once migrate it once, into its schema; claims racing from four stores each win a different task, and no error reaches a caller', async () => {
    const url = await freshDatabase('settings');
    url.searchParams.set('schema', 'tl_settings');
    url.searchParams.set('options', '-c default_transaction_isolation=repeatable\\ read -c search_path=public -c statement_timeout=7s');
    const stores = Array.from({ length: 4 }, () => createPgStore({ url: url.toString() }));
    const managers = stores.map((store) => createTaskManager({ store }));
    onTestFinished(async () => {
      for (const tm of managers) await tm.close();
    });
    await Promise.all(stores.map((s) => s.ready));

    const [settings] = await stores[0]!.conn.query<Record<string, string>>(
      "SELECT current_setting('transaction_isolation') AS isolation, current_setting('search_path') AS path, current_setting('statement_timeout') AS timeout",
    );
    expect(settings).toEqual({ isolation: 'read committed', path: 'tl_settings', timeout: '7s' });
    const [placed] = await stores[0]!.conn.query<{ ours: boolean; public: boolean }>(
      "SELECT to_regclass('tl_settings.tasks') IS NOT NULL AS ours, to_regclass('public.tasks') IS NOT NULL AS public",
    );
    expect(placed).toEqual({ ours: true, public: false });

    await managers[0]!.createTasks(Array.from({ length: 200 }, (_, i) => ({ title: `t${i}` })), operator);
    const errors: string[] = [];
    const won: number[] = [];
    await Promise.all(
      managers.flatMap((tm, i) =>
        Array.from({ length: 3 }, async (_, j) => {
          for (;;) {
            try {
              const got = await tm.claimTask({ agent: `a${i}-${j}`, start: j % 2 === 0 });
              if (got === null) return;
              won.push(got.id);
            } catch (e) {
              errors.push(isEngineError(e) ? e.code : `raw ${String((e as { code?: unknown }).code)}: ${(e as Error).message}`);
              if (errors.length > 20) return;
            }
          }
        }),
      ),
    );
    expect(errors).toEqual([]);
    expect(won).toHaveLength(200);
    expect(new Set(won).size).toBe(200);
    expect((await managers[1]!.stats()).byState.pending ?? 0).toBe(0);
    // One version row: migrated once.
    expect(await (stores[0] as PgTaskStore).conn.query('SELECT version FROM schema_version')).toHaveLength(1);
  });

  it('a one-statement claim chosen as a deadlock’s victim runs again: it claims another task, once, and no error reaches the caller', async () => {
    const url = newDatabase(tempDir());
    const schema = new URL(url).searchParams.get('schema')!;
    const store = createPgStore({ url });
    const tm = createTaskManager({ store });
    onTestFinished(() => tm.close());
    const [first, second] = (await tm.createTasks([{ title: 'first' }, { title: 'second' }], operator)).map((r) => r.task);

    await withClient(url, async (other) => {
      // Another session holds the schema's event lock: the claim locks 'first', then waits for it.
      await other.query('BEGIN');
      await other.query('SELECT pg_advisory_xact_lock($1, $2)', [EVENT_LOCK_CLASS, eventLockKey(schema)]);
      const claim = tm.claimTask({ agent: 'w' });
      // A claim that fails (as a deadlock's victim not run again) fails the waits below at once.
      let failed: unknown;
      claim.catch((e: unknown) => (failed = e));
      // Read on this session (a read in its open transaction): a new connection per look took
      // long enough under load that the claim's one deadlock check (deadlock_timeout after its
      // wait began) could run before this session waited too, and this session was the victim.
      const waiting = async () => {
        if (failed !== undefined) throw failed;
        return (await other.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).rows[0]!.n;
      };
      await waitFor(async () => (await waiting()) === 1, 10_000, 'the claim to wait');
      // Now the other session waits for the claim's row: a deadlock. The claim began waiting
      // first, so its deadlock_timeout runs out first, and it is the one PostgreSQL aborts
      // (40P01). The other session then gets the row, which proves the claim let it go.
      await other.query('SELECT id FROM tasks WHERE id = $1 FOR UPDATE', [first!.id]);
      // Run again, the claim skips 'first' (this session holds it now), takes 'second' and
      // waits for the event lock once more; then this session lets both go.
      await waitFor(async () => (await waiting()) === 1, 10_000, 'the claim, run again, to wait');
      await other.query('COMMIT');
      const claimed = await claim;
      expect(claimed?.id).toBe(second!.id);
    });
    const events = await sql<{ task_id: number; type: string }>(url, "SELECT task_id::int AS task_id, type FROM task_events WHERE type = 'task.claimed' ORDER BY id");
    expect(events).toEqual([{ task_id: second!.id, type: 'task.claimed' }]);
    expect(await tm.getTask(first!.id)).toMatchObject({ state: 'pending', attempts: 0 });
    expect(await tm.getTask(second!.id)).toMatchObject({ state: 'claimed', attempts: 1, assignee: 'w' });
  });

  it('behind a pooler that drops the startup options, opening refuses with STORE_UNAVAILABLE and creates nothing (the tables would have gone to public)', async () => {
    const url = await freshDatabase('dropped');
    const proxy = await optionsDroppingProxy(url);
    const through = new URL(url);
    through.port = String(proxy.port);
    through.searchParams.set('schema', 'tl_dropped');
    const store = createPgStore({ url: through.toString() });
    const err = await store.ready.then(() => undefined, (e: unknown) => e);
    await store.close();
    expect(isEngineError(err) && err.code, String(err)).toBe('STORE_UNAVAILABLE');
    expect((err as Error).message).toMatch(/search path '.*public.*', not 'tl_dropped' as asked in its startup options/);
    expect(proxy.dropped()).toBeGreaterThan(0);
    const [placed] = await admin(url.toString(), "SELECT to_regclass('public.tasks') IS NULL AS no_public, to_regnamespace('tl_dropped') IS NULL AS no_schema");
    expect(placed).toEqual({ no_public: true, no_schema: true });
  });
});

