/**
 * Another user of the database may be able to create objects in `public` (PostgreSQL 14 and
 * older let everyone). An operator or function there that is a closer match than
 * pg_catalog's for some arguments would run as taskloop's role inside its transactions if
 * `public` were on the store's search path: it is not (connection.ts), next_event_id() is
 * re-pinned without it (migration 3), and the channel statements name pg_catalog's own.
 */
import { describe, expect, inject, it, onTestFinished } from 'vitest';
import { createTaskManager } from '../../src/engine/index.js';
import { createPgStore } from '../../src/engine/postgres/task-store.js';
import { NOTIFY_CONTROLS } from '../../src/engine/postgres/watch.js';
import { agent, operator, system } from '../helpers.js';
import { admin } from './sql.js';

describe('a look-alike operator in public', () => {
  it('never runs in taskloop’s statements: creates, claims, a completion that frees a dependent, the clock, event ids and a control wake-up use pg_catalog’s', async () => {
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
    // More look-alikes, each a closer match than pg_catalog's for what taskloop sends: an
    // untyped 'UTF8' (convert_from's second argument is a name), numeric * integer (the clock),
    // nextval on a text (the event ids).
    await admin(
      url.toString(),
      `CREATE FUNCTION public.convert_from(bytea, text) RETURNS text LANGUAGE plpgsql AS
         $$ BEGIN INSERT INTO public.loot VALUES ('convert_from'); RETURN pg_catalog.convert_from($1, $2::name); END $$;
       CREATE FUNCTION public.times(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS
         $$ BEGIN INSERT INTO public.loot VALUES ('times'); RETURN $1 OPERATOR(pg_catalog.*) $2::numeric; END $$;
       CREATE OPERATOR public.* (leftarg = numeric, rightarg = integer, function = public.times);
       CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS
         $$ BEGIN INSERT INTO public.loot VALUES ('nextval'); RETURN pg_catalog.nextval($1::regclass); END $$`,
    );
    // Each is live: unqualified, with public on the path, they run.
    await admin(url.toString(), "SELECT 'taskloop_' || current_schema(), convert_from('\\x41'::bytea, 'UTF8'), 1.5::numeric * 1000");
    // (The third is the server's user, which may sort anywhere.)
    const live = await admin(url.toString(), 'SELECT who FROM public.loot');
    expect(live).toHaveLength(3);
    expect(live).toEqual(expect.arrayContaining([{ who: 'convert_from' }, { who: 'times' }]));
    await admin(url.toString(), 'TRUNCATE public.loot');

    const store = createPgStore({ url: `${url.toString()}${url.search === '' ? '?' : '&'}schema=tl` });
    const tm = createTaskManager({ store });
    onTestFinished(() => tm.close());
    const { task: first } = await tm.createTask({ title: 'first' }, operator);
    const { task: after } = await tm.createTask({ title: 'after', dependsOn: [first.id] }, operator);
    await tm.createTask({ title: 'third', dependsOn: [after.id] }, operator);
    const me = agent('agent-1');
    const c = (await tm.claimTask({ agent: me.id, taskId: first.id, start: true }))!;
    await tm.transitionTask({ taskId: c.id, to: 'review', actor: me, claimToken: c.claimToken, then: [{ to: 'completed', actor: system }] });
    // The next task claimed and completed by the same store: its move is one statement of its own (move-one.ts).
    const next = (await tm.claimTask({ agent: me.id, start: true }))!;
    expect(next.title).toBe('after');
    await tm.transitionTask({ taskId: next.id, to: 'review', actor: me, claimToken: next.claimToken, then: [{ to: 'completed', actor: system }] });
    expect((await tm.claimTask({ agent: me.id }))?.title).toBe('third');
    await store.conn.query(NOTIFY_CONTROLS);
    expect(await admin(url.toString(), 'SELECT who FROM public.loot')).toEqual([]);
  });
  it('a schema made before version 3 has next_event_id’s path re-pinned without public by the migration', async () => {
    const server = inject('pgUrl');
    const url = `${server}${server.includes('?') ? '&' : '?'}schema=repin_${process.pid}`;
    const schema = `repin_${process.pid}`;
    onTestFinished(() => admin(server, `DROP SCHEMA IF EXISTS ${schema} CASCADE`).then(() => undefined));
    const first = createPgStore({ url });
    await first.ready;
    await first.close();
    // As version 2 left it: the function's path taken from connections that put public on it.
    await admin(server, `ALTER FUNCTION ${schema}.next_event_id() SET search_path = ${schema}, public; UPDATE ${schema}.schema_version SET version = 2`);
    const config = async () => (await admin(server, `SELECT proconfig FROM pg_proc WHERE proname = 'next_event_id' AND pronamespace = '${schema}'::regnamespace`))[0]!.proconfig;
    expect(await config()).toEqual([`search_path=${schema}, public`]);
    const again = createTaskManager({ store: createPgStore({ url }) });
    onTestFinished(() => again.close());
    const { task } = await again.createTask({ title: 'after the migration' }, operator);
    expect(task.id).toBeGreaterThan(0);
    expect(await config()).toEqual([`search_path=${schema}`]);
  });
});
