/**
 * On PostgreSQL too, a pick reads the claimable tasks in parts (schema version 6), and a
 * daemon's the twins that hold only tasks with a card (version 4): 2,000 tasks waiting for
 * agents, and tasks reserved for another agent or requiring what it lacks, are not in its way.
 * Nor tasks not yet due (version 9): they are in tasks_delayed alone until a claim releases them.
 */
import { describe, expect, it } from 'vitest';
import { claimOneSql, pickOpening } from '../../src/engine/postgres/claim.js';
import { lookSql } from '../../src/engine/postgres/pick.js';
import { eventLockKey } from '../../src/engine/postgres/event-lock.js';
import { PG_MIGRATIONS } from '../../src/engine/postgres/migrations.js';
import { newDatabase } from '../stores.js';
import { claimNeeds } from '../../src/engine/claim-needs.js';
import { literal } from '../../src/engine/postgres/connection.js';
import { agent, freshManager, operator, tempDir } from '../helpers.js';
import { budgetOfTask } from '../../src/workers/budget.js';
import { portsOf } from '../stores.js';
import { sql, withClient } from './sql.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

/**
 * The index names in the plan of `text` as a claim runs it: a prepared statement, whose plan
 * after a few executions is the generic one (forced here).
 */
async function indexesOf(url: string, text: string, params: unknown[], types: string[]): Promise<string[]> {
  const plan = await planOf(url, text, params, types);
  // A part is walked in claim order from its index, never read whole (a bitmap) or scanned.
  expect(plan).not.toMatch(/"Node Type":"(Seq Scan|Bitmap Heap Scan)"/);
  return [...plan.matchAll(/"Index Name":"(\w+)"/g)].map((m) => m[1]!);
}

async function planOf(url: string, text: string, params: unknown[], types: string[]): Promise<string> {
  return withClient(url, async (client) => {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE pick ${types.length > 0 ? `(${types.join(', ')})` : ''} AS ${text}`);
    const literals = params.map((v) => (v === null ? 'NULL' : typeof v === 'number' || typeof v === 'boolean' ? String(v) : client.escapeLiteral(String(v)))).join(', ');
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE pick (${literals})`);
    return JSON.stringify(rows[0]['QUERY PLAN']);
  });
}

describe('the pick on PostgreSQL', () => {
  it('reads each part of the claimable tasks from its own index (a daemon the twins of tasks with a card), generic plan, never a scan', async () => {
    const tm = freshManager();
    for (let i = 0; i < 10_000; i += 1000) {
      await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `for an agent ${i + j}`, priority: 5 })), operator);
    }
    // A hostile agent's flood: reserved for a made-up agent, or requiring what no one has.
    await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `for a ghost ${j}`, forAgent: 'ghost', card: CARD })), agent('mallory'));
    await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `needs magic ${j}`, requires: ['magic'], card: CARD })), agent('mallory'));
    // Aimed at a claimer offering gpu: requiring it and what it lacks.
    await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `needs gpu and magic ${j}`, requires: ['gpu', 'magic'], card: CARD })), agent('mallory'));
    // An operator's reminders due in 2100, ahead of everything: in no part until due.
    await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `reminder ${j}`, priority: 9, runAfter: Date.UTC(2100, 0, 1), card: CARD })), operator);
    await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `reminder, gpu ${j}`, priority: 9, requires: ['gpu'], runAfter: Date.UTC(2100, 0, 1), card: CARD })), operator);
    await tm.createTask({ title: 'for a daemon', card: CARD }, operator);
    // The claim's own pick (its first round trip, FOR UPDATE SKIP LOCKED), the look before it and
    // the one-statement claim: before the table's statistics are gathered (a burst of creates)
    // and after.
    for (const analyzed of [false, true]) {
      if (analyzed) await sql(tm.path, 'ANALYZE tasks');
      for (const withCard of [true, false]) {
        // None; sets looked up (up to eight capabilities: 255 sets); past eight, the walk in
        // claim order (claim-needs.ts).
        for (const caps of [[], ['gpu'], ['gpu', 'tpu'], ['a', 'b', 'c', 'd', 'gpu'], ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'gpu'], ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'gpu']]) {
          const twin = withCard ? '_card' : '';
          const needs = claimNeeds(caps);
          const parts = [`tasks_ready_open${twin}`, `tasks_ready_for${twin}`];
          if (needs.shape === 'walk') parts.push(`tasks_ready_needs_walk${twin}`);
          else if (needs.shape > 0) parts.push(`tasks_ready_needs_set${twin}`, `tasks_ready_needs_for${twin}`);
          const opening = pickOpening({ agent: 'a', withCard, capabilities: caps }, undefined);
          // Each part from its own index; the task itself then by its id.
          const byId = ['tasks_pkey', 'tasks_by_queue'];
          // The opening and the one-statement claim also read tasks_delayed for tasks due but not released.
          for (const [used, read] of [
            [await indexesOf(tm.path, opening.sql, opening.args, opening.types), [...parts, 'tasks_delayed']],
            [await indexesOf(tm.path, lookSql(withCard, needs.shape, 'id'), ['default', Date.now(), 'a', needs.param], ['text', 'bigint', 'text', 'text']), parts],
            // The one-statement claim (TaskManager.claimTask): its parameters' types are inferred.
            [await indexesOf(tm.path, claimOneSql(withCard, needs.shape, false), ['default', 'a', needs.param, null, 'claimed', 't', 60_000, null, 'a', 'b', 'c', 'd', false, true], []), [...parts, 'tasks_delayed']],
          ] as const) {
            expect(read.filter((p) => !used.includes(p)), opening.name).toEqual([]);
            expect(used.filter((n) => !read.includes(n) && !byId.includes(n)), opening.name).toEqual([]);
          }
        }
      }
    }
    // Nothing walks the flood: the pick returns the real task having read a handful of rows.
    expect((await tm.claimTask({ agent: 'a', withCard: true }))?.title).toBe('for a daemon');
    expect((await tm.claimTask({ agent: 'a', capabilities: ['gpu'] }))?.title).toBe('for an agent 0');
    // A claimer offering gpu reads only the set ["gpu"], where the flood is not: its plan's index conditions name the set.
    const gpu = claimNeeds(['gpu']);
    const plan = await planOf(tm.path, lookSql(true, gpu.shape, 'id'), ['default', Date.now(), 'a', gpu.param], ['text', 'bigint', 'text', 'text']);
    const conds = [...plan.matchAll(/"Index Name":"tasks_ready_needs_(?:set|for)_card"[^}]*?"Index Cond":"([^"]*)"/g)].map((m) => m[1]!);
    expect(conds.length).toBe(2);
    for (const cond of conds) expect(cond).toMatch(/requires = /);
    // However many sets a claimer covers, the statement is the same (a LATERAL over them):
    // as one part per set, a claimer offering four capabilities had 32 parts to plan.
    for (const withCard of [false, true]) {
      const texts = [['a'], ['a', 'b'], ['a', 'b', 'c', 'd']].map((caps) => pickOpening({ agent: 'a', withCard, capabilities: caps }, undefined));
      expect(new Set(texts.map((o) => o.sql)).size).toBe(1);
      expect(new Set(texts.map((o) => o.name)).size).toBe(1);
      expect(new Set([1, 3, 15].map((n) => claimOneSql(withCard, n, false))).size).toBe(1);
    }
    await tm.close();
  });

  it('with the first entries of every part held by other claimers, a claim takes the next free task (both ways of claiming), never nothing', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const open = (await tm.createTasks(Array.from({ length: 12 }, (_, i) => ({ title: `open ${i}`, card: CARD })), operator)).map((c) => c.task.id);
    const mine = (await tm.createTasks(Array.from({ length: 6 }, (_, i) => ({ title: `for a ${i}`, forAgent: 'a', card: CARD })), operator)).map((c) => c.task.id);
    await withClient(tm.path, async (holder) => {
      // Another claimer's transaction holds the first entries (more than a fast pick tries) of both parts.
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM tasks WHERE id = ANY($1) FOR UPDATE', [[...open.slice(0, 8), ...mine.slice(0, 8)]]);
      // One statement (TaskManager.claimTask) and a transaction's first round trip (a daemon's claimRun).
      expect((await tm.claimTask({ agent: 'a' }))?.id).toBe(open[8]);
      const run = await runs.claimRun({ agent: 'a', withCard: true }, (t, now) => budgetOfTask(t.card, now));
      expect(run?.task.id).toBe(open[9]);
      await holder.query('ROLLBACK');
    });
    // With the locks gone, the held entries are claimable again, in order.
    expect((await tm.claimTask({ agent: 'a' }))?.id).toBe(open[0]);
    await tm.close();
  });

  it('with a part’s first entries held, a claim still takes the best free task, not a worse one from another part', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const open = (await tm.createTasks(Array.from({ length: 6 }, (_, i) => ({ title: `open ${i}`, priority: 9, card: CARD })), operator)).map((c) => c.task.id);
    await tm.createTask({ title: 'for a, low', forAgent: 'a', priority: 1, card: CARD }, operator);
    await withClient(tm.path, async (holder) => {
      // Four claims in flight hold the open part's first four: the fifth and sixth are free and better.
      await holder.query('BEGIN');
      await holder.query('SELECT id FROM tasks WHERE id = ANY($1) FOR UPDATE', [open.slice(0, 4)]);
      expect((await tm.claimTask({ agent: 'a' }))?.id).toBe(open[4]);
      expect((await runs.claimRun({ agent: 'a', withCard: true }, (t, now) => budgetOfTask(t.card, now)))?.task.id).toBe(open[5]);
      await holder.query('ROLLBACK');
    });
    await tm.close();
  });

  it('a daemon’s claim that had to pick slowly wakes every claimer at its commit (it held other tasks locked to its end); a plain claim wakes no one', async () => {
    const tm = freshManager();
    const { runs } = portsOf(tm);
    const schema = new URL(tm.path).searchParams.get('schema')!;
    const open = (await tm.createTasks(Array.from({ length: 8 }, (_, i) => ({ title: `open ${i}`, card: CARD })), operator)).map((c) => c.task.id);
    const budget = (t: { card: unknown }, now: number) => budgetOfTask(t.card as typeof CARD, now);
    await withClient(tm.path, async (listener) => {
      const heard: string[] = [];
      listener.on('notification', (n) => heard.push(n.channel));
      await listener.query(`LISTEN "taskloop_${schema}"`);
      const settle = () => new Promise((r) => setTimeout(r, 300));
      await settle();
      heard.length = 0;
      expect((await runs.claimRun({ agent: 'a', withCard: true }, budget))?.task.id).toBe(open[0]);
      await settle();
      expect(heard).toEqual([]);
      await withClient(tm.path, async (holder) => {
        await holder.query('BEGIN');
        await holder.query('SELECT id FROM tasks WHERE id = ANY($1) FOR UPDATE', [open.slice(1, 5)]);
        expect((await runs.claimRun({ agent: 'a', withCard: true }, budget))?.task.id).toBe(open[5]);
        await settle();
        expect(heard).toEqual([`taskloop_${schema}`]);
        await holder.query('ROLLBACK');
      });
    });
    await tm.close();
  });
});

/** A fresh schema at `version`, as that build left it: its migrations applied, its version. */
async function schemaAt(version: number): Promise<string> {
  const url = newDatabase(tempDir());
  const schema = new URL(url).searchParams.get('schema')!;
  await sql(url, `CREATE SCHEMA ${schema}`);
  for (const step of PG_MIGRATIONS.slice(0, version)) await sql(url, step.replaceAll('{{event_lock}}', String(eventLockKey(schema))));
  await sql(url, `CREATE TABLE schema_version (version integer NOT NULL); INSERT INTO schema_version VALUES (${version})`);
  return url;
}

describe('a schema at version 7 or 8, opened', () => {
  it('builds the parts by requirement set and of tasks due with the tasks already pending in them (those not yet due in none), and claims take them in order', async () => {
    for (const from of [7, 8]) {
      const url = await schemaAt(from);
      // Tasks as that build wrote them (SQL, no store), all created at 0; two delayed by an operator.
      const add = (title: string, priority: number, requires: string | null, forAgent: string | null, runAfter = 0) =>
        sql(
          url,
          `INSERT INTO tasks (title, state, priority, creator, creator_role, max_attempts, queue, for_agent, requires, run_after, unmet_deps, created_at, updated_at, card)
           VALUES ($1, 'pending', $2, 'op', 'operator', 3, 'default', $3, $4, $5, 0, 0, 0, '{}')`,
          [title, priority, forAgent, requires, runAfter],
        );
      await add('open, 1', 1, null, null);
      await add('gpu, 3', 3, '["gpu"]', null);
      await add('for a, gpu, 4', 4, '["gpu"]', 'a');
      await add('gpu and tpu, 5', 5, '["gpu","tpu"]', null);
      await add('for b, gpu, 6', 6, '["gpu"]', 'b');
      await add('magic, 7', 7, '["magic"]', null);
      await add('was delayed, due, 0', 0, null, null, 5);
      await add('in 2100, 9', 9, null, null, Date.UTC(2100, 0, 1));
      const tm = freshManager({ path: url });
      const claimed: string[] = [];
      for (let t = await tm.claimTask({ agent: 'a', capabilities: ['gpu', 'tpu'] }); t !== null; t = await tm.claimTask({ agent: 'a', capabilities: ['gpu', 'tpu'] })) claimed.push(t.title);
      expect(claimed, `from ${from}`).toEqual(['gpu and tpu, 5', 'for a, gpu, 4', 'gpu, 3', 'open, 1', 'was delayed, due, 0']);
      // A claimer that walks (more than eight capabilities) reads the walk's index.
      expect((await tm.claimTask({ agent: 'b', capabilities: ['gpu', 'q', 'r', 's', 't', 'v', 'w', 'x', 'y'] }))?.title).toBe('for b, gpu, 6');
      const indexes = (await sql<{ indexname: string }>(url, "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'tasks' AND (indexname LIKE 'tasks_ready%' OR indexname LIKE 'tasks_claimable%') ORDER BY 1")).map((r) => r.indexname);
      expect(indexes).toEqual(['open', 'for', 'needs_set', 'needs_for', 'needs_walk'].flatMap((n) => [`tasks_ready_${n}`, `tasks_ready_${n}_card`]).sort());
      expect(await sql(url, "SELECT title FROM tasks WHERE state = 'pending' AND delayed")).toEqual([{ title: 'in 2100, 9' }]);
      expect(await sql(url, 'SELECT version FROM schema_version')).toEqual([{ version: PG_MIGRATIONS.length }]);
      await tm.close();
    }
  });
});

describe('the pick behind a pooler (wakeups=poll), its values written into the text', () => {
  it('reads each part by its index, the queue and the requirement set as index conditions: neither the queue’s claimable tasks nor a flood are read', async () => {
    const tm = freshManager();
    await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `open ${j}`, card: CARD })), operator);
    await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `needs magic ${j}`, requires: ['magic'], card: CARD })), agent('mallory'));
    await tm.createTask({ title: 'needs gpu', requires: ['gpu'], priority: 1, card: CARD }, operator);
    for (const caps of [[], ['gpu'], ['gpu', 'tpu', 'x', 'y'], ['gpu', 'tpu', 'x', 'y', 'a', 'b', 'c', 'd']]) {
      const opening = pickOpening({ agent: 'a', withCard: true, capabilities: caps }, undefined);
      // As connection.ts writes an opening without named statements: each $n its literal.
      const text = opening.sql.replace(/\$(\d+)/g, (_, n: string) => `${literal(opening.args[Number(n) - 1]!)}::${opening.types[Number(n) - 1]}`);
      const plan = await withClient(tm.path, async (client) => {
        await client.query('BEGIN');
        try {
          return JSON.stringify((await client.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${text}`)).rows[0]['QUERY PLAN']);
        } finally {
          await client.query('ROLLBACK');
        }
      });
      const rows = [...plan.matchAll(/"Actual Rows":(\d+)/g)].map((m) => Number(m[1]));
      // At most the sets looked up (15 for four capabilities, 255 for eight); a part read by a
      // filter on the queue read 1,000.
      expect(Math.max(...rows), `${JSON.stringify(caps)}: ${plan}`).toBeLessThanOrEqual(Math.max(15, 2 ** caps.length - 1));
      // The queue is an index condition of every part (the re-check of the row found is a CASE).
      expect(plan).not.toMatch(/"Filter":"(?!CASE WHEN)[^"]*queue = /);
      expect(plan).toMatch(/"Index Name":"tasks_ready_open_card"[^}]*"Index Cond":"\(queue = /);
    }
    await tm.close();
  });
});
