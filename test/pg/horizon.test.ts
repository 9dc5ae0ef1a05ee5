/**
 * The event tail's horizon on PostgreSQL (reads.ts createHorizon): ids handed out above it
 * while their writers run are settled once those writers end, and until then the horizon
 * says it is unsettled, so the watcher looks again (watch.ts onUnsettled) rather than wait
 * for the next write. Driven step by step: two writers held open by the test, and the
 * horizon's connection paused between its statements.
 */
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { type PgConnection, connectPg, parsePgUrl } from '../../src/engine/postgres/connection.js';
import { createHorizon, createReads } from '../../src/engine/postgres/reads.js';
import { createPgStore } from '../../src/engine/postgres/task-store.js';
import { tempDir } from '../helpers.js';
import { newDatabase } from '../stores.js';

/** A writer of its own: a transaction that took one event id, held open until `end`. */
async function openWriter(url: string): Promise<{ id: number; end: () => Promise<void> }> {
  const u = new URL(url);
  const schema = u.searchParams.get('schema')!;
  u.searchParams.delete('schema');
  const client = new pg.Client({ connectionString: u.toString(), options: `-c search_path=${schema}` });
  await client.connect();
  onTestFinished(() => client.end().catch(() => undefined));
  await client.query('BEGIN');
  const { rows } = await client.query<{ id: string }>(
    "INSERT INTO task_events (task_id, type, actor, actor_role, data, created_at) VALUES (NULL, 'test.written', 'w', 'agent', '{}', 0) RETURNING id",
  );
  return { id: Number(rows[0]!.id), end: async () => void (await client.query('COMMIT')) };
}

/** A fresh schema, migrated, and a connection of the adapter's own to it. */
async function migrated(): Promise<{ url: string; conn: PgConnection }> {
  const url = newDatabase(tempDir());
  const store = createPgStore({ url });
  await store.ready;
  await store.close();
  const conn = connectPg(parsePgUrl(url));
  onTestFinished(() => conn.close());
  return { url, conn };
}

/**
 * A migrated schema and a connection to it whose next read of the lock's holders (`gate`:
 * a re-check through query, or a whole look through multi) runs on the server at once but
 * reaches the horizon only when the test releases it: an answer held up on its way (a slow
 * socket, a backend descheduled before it replied) while another call looks.
 */
async function heldUp() {
  const { url, conn } = await migrated();
  let gate: { via: 'query' | 'multi'; ran: () => void; held: Promise<void> } | undefined;
  const hold = async (via: 'query' | 'multi', text: string): Promise<void> => {
    const g = gate;
    if (g === undefined || g.via !== via || !text.includes('pg_locks')) return;
    gate = undefined;
    g.ran();
    await g.held;
  };
  const wrapped: PgConnection = {
    ...conn,
    query: (async (text: string, params?: unknown[], what?: string) => {
      const rows = await conn.query(text, params, what);
      await hold('query', text);
      return rows;
    }) as PgConnection['query'],
    multi: async (text) => {
      const rows = await conn.multi(text);
      await hold('multi', text);
      return rows;
    },
  };
  const horizon = createHorizon(wrapped);
  const arm = (via: 'query' | 'multi') => {
    let ran!: () => void;
    let release!: () => void;
    const executed = new Promise<void>((r) => (ran = r));
    gate = { via, ran, held: new Promise<void>((r) => (release = r)) };
    return { executed, release };
  };
  return { url, horizon, reads: createReads(wrapped, horizon), arm };
}

describe('the event horizon on PostgreSQL', () => {
  it('a writer that ends while the horizon waits for an older one: the newer writer’s id stays unsettled and asks for another look, and is settled once it ends', async () => {
    const { url, conn } = await migrated();
    // Between the horizon's first look (sequence and holders) and its re-checks of the holders.
    let afterLook: (() => Promise<void>) | undefined;
    const horizon = createHorizon({
      ...conn,
      multi: async (text) => {
        const rows = await conn.multi(text);
        const hook = afterLook;
        afterLook = undefined;
        await hook?.();
        return rows;
      },
    });
    let asked = 0;
    horizon.onUnsettled = () => void asked++;

    const older = await openWriter(url);
    // Look 1: the older writer holds its id: unsettled, another look asked for.
    expect(await horizon.settled()).toBe(0);
    expect(horizon.unsettled).toBe(true);
    expect(asked).toBe(1);

    const newer = await openWriter(url);
    expect(newer.id).toBeGreaterThan(older.id);
    // Look 2 sees both writers; the older one ends before the horizon checks its holders again.
    afterLook = older.end;
    const settled = await horizon.settled();
    expect(settled).toBe(older.id);
    // The newer id was handed out and its writer still runs: the horizon must not call itself settled.
    expect(horizon.unsettled).toBe(true);
    expect(asked).toBe(2);

    await newer.end();
    expect(await horizon.settled()).toBe(newer.id);
    expect(horizon.unsettled).toBe(false);
  });

  // Found by a hostile review: one horizon serves a store's followers, readEvents and
  // lastEventId at once. A read of the holders may settle only what was waiting when it was
  // sent; applied to an H a concurrent look pushed meanwhile, a writer that took its id
  // between the two reads is missing from it though it runs, and its event was lost for good.
  it('a re-check whose answer arrives after a newer look does not settle that look’s H while a writer below it runs', async () => {
    const { url, horizon, arm } = await heldUp();
    const w = await openWriter(url);
    const { executed, release } = arm('query');
    const first = horizon.settled(); // look: H = w, holders {w}; its re-check ran, answer held
    await executed;
    await w.end();
    const x = await openWriter(url); // still running
    const y = await openWriter(url);
    await y.end();
    expect(await horizon.settled()).toBe(w.id); // H = y, holders {x}
    release(); // the held answer ({w}, seen before x began) arrives now
    expect(await first).toBe(w.id);
    expect(await horizon.settled()).toBe(w.id);
    await x.end();
    expect(await horizon.settled()).toBe(y.id);
  });

  it('a look whose answer arrives after a newer look does not settle that look’s H', async () => {
    const { url, horizon, arm } = await heldUp();
    const w = await openWriter(url);
    expect(await horizon.settled()).toBe(0);
    await w.end();
    const { executed, release } = arm('multi');
    const first = horizon.settled(); // look: H = w, no holders; answer held
    await executed;
    const x = await openWriter(url); // still running
    const y = await openWriter(url);
    await y.end();
    expect(await horizon.settled()).toBe(w.id); // H = y, holders {x}
    release();
    expect(await first).toBe(w.id);
    await x.end();
    expect(await horizon.settled()).toBe(y.id);
  });

  it('end to end: a reader following from a cursor gets the event of the writer that was still running, after the others', async () => {
    const { url, reads, arm } = await heldUp();
    const w = await openWriter(url);
    const { executed, release } = arm('query');
    const early = reads.readEvents({ afterId: 0 });
    await executed;
    await w.end();
    const x = await openWriter(url);
    const y = await openWriter(url);
    await y.end();
    const seen = (await reads.readEvents({ afterId: 0 })).map((e) => e.id);
    release();
    seen.push(...(await early).map((e) => e.id));
    let cursor = Math.max(0, ...seen);
    await x.end();
    for (let more = await reads.readEvents({ afterId: cursor }); more.length > 0; more = await reads.readEvents({ afterId: cursor })) {
      seen.push(...more.map((e) => e.id));
      cursor = more.at(-1)!.id;
    }
    expect([...new Set(seen)].sort((a, b) => a - b)).toEqual([w.id, x.id, y.id]);
  });

  it('two long writers, the second begun after the first: when the first ends, everything below the second one’s id is settled, however many looks came between', async () => {
    const { url, horizon } = await heldUp();
    const first = await openWriter(url);
    for (let i = 0; i < 3; i++) await (await openWriter(url)).end();
    expect(await horizon.settled()).toBe(0);
    const second = await openWriter(url);
    for (let i = 0; i < 33; i++) {
      await (await openWriter(url)).end();
      await horizon.settled();
    }
    await first.end();
    expect(await horizon.settled()).toBe(second.id - 1);
    await second.end();
    expect(await horizon.settled()).toBe(second.id + 33);
  });
});

