/**
 * The event tail's horizon on PostgreSQL (reads.ts createHorizon): ids handed out above it
 * while their writers run are settled once those writers end, and until then the horizon
 * says it is unsettled, so the watcher looks again (watch.ts onUnsettled) rather than wait
 * for the next write. Driven step by step: two writers held open by the test, and the
 * horizon's connection paused between its statements.
 */
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { connectPg, parsePgUrl } from '../../src/engine/postgres/connection.js';
import { createHorizon } from '../../src/engine/postgres/reads.js';
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

describe('the event horizon on PostgreSQL', () => {
  it('a writer that ends while the horizon waits for an older one: the newer writer’s id stays unsettled and asks for another look, and is settled once it ends', async () => {
    const url = newDatabase(tempDir());
    const store = createPgStore({ url });
    await store.ready;
    await store.close();
    const conn = connectPg(parsePgUrl(url));
    onTestFinished(() => conn.close());
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
});
