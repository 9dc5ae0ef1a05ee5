/**
 * `public` is on the store's search path (extensions live there), and another user of the
 * database may be able to create objects in it (PostgreSQL 14 and older let everyone). An
 * operator or function there that is a closer match than pg_catalog's for some arguments
 * would run as taskloop's role inside its transactions: the statements taskloop composes
 * with an untyped literal (the wake-up and control channels) name pg_catalog's own.
 */
import pg from 'pg';
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { createPgStore } from '../../src/engine/postgres/task-store.js';
import { NOTIFY_CONTROLS } from '../../src/engine/postgres/watch.js';
import { agent, operator, system } from '../helpers.js';

async function admin(url: string, text: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(text)).rows;
  } finally {
    await client.end();
  }
}

describe('a look-alike operator in public', () => {
  it('never runs in taskloop’s statements: a completion that frees a dependent and a control wake-up use pg_catalog’s', async () => {
    const server = inject('pgUrl');
    const database = `lookalike_${process.pid}_${Date.now()}`;
    await admin(server, `CREATE DATABASE ${database}`);
    const url = new URL(server);
    url.pathname = `/${database}`;
    onTestFinished(() => admin(server, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).then(() => undefined));
    // What another user with CREATE on public could leave there: `text || name` that records who ran it.
    await admin(
      url.toString(),
      `CREATE TABLE public.loot (who text);
       GRANT INSERT ON public.loot TO PUBLIC;
       CREATE FUNCTION public.lookalike(text, name) RETURNS text LANGUAGE plpgsql AS
         $$ BEGIN INSERT INTO public.loot VALUES (current_user); RETURN $1 || $2::text; END $$;
       CREATE OPERATOR public.|| (leftarg = text, rightarg = name, function = public.lookalike)`,
    );
    // The operator is live: an unqualified concatenation with the schema's name runs it.
    await admin(url.toString(), "SELECT 'taskloop_' || current_schema()");
    expect(await admin(url.toString(), 'SELECT count(*)::int AS n FROM public.loot')).toEqual([{ n: 1 }]);
    await admin(url.toString(), 'TRUNCATE public.loot');

    const store = createPgStore({ url: `${url.toString()}${url.search === '' ? '?' : '&'}schema=tl` });
    const tm = createTaskManager({ store });
    onTestFinished(() => tm.close());
    const { task: first } = await tm.createTask({ title: 'first' }, operator);
    await tm.createTask({ title: 'after', dependsOn: [first.id] }, operator);
    const me = agent('agent-1');
    const c = (await tm.claimTask({ agent: me.id, taskId: first.id, start: true }))!;
    await tm.transitionTask({ taskId: c.id, to: 'review', actor: me, claimToken: c.claimToken, then: [{ to: 'completed', actor: system }] });
    expect((await tm.claimTask({ agent: me.id }))?.title).toBe('after');
    await store.conn.query(NOTIFY_CONTROLS);
    expect(await admin(url.toString(), 'SELECT count(*)::int AS n FROM public.loot')).toEqual([{ n: 0 }]);
  });
});
