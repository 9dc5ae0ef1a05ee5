/**
 * An agent's listing on PostgreSQL reads what the agent's own tasks cost, not the table. As one
 * OR (what it created, holds or held, may claim) the planner walked the primary key checking
 * every row: an agent with no completed task listing the completed ones read all of them
 * (9.8 ms at 21,300 tasks, plan audit, session 27). Each term now has a page of its own index.
 * Checked on the plan a listing runs, custom (an unnamed statement) and generic (the plan a
 * named prepared statement may switch to after a few runs), with rows counted by EXPLAIN ANALYZE.
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { FindTasksQuery } from '../../src/engine/index.js';
import { listingSql } from '../../src/engine/postgres/reads.js';
import { agent, freshManager, operator } from '../helpers.js';
import { sql, withClient } from './sql.js';

type PlanNode = { 'Node Type': string; 'Index Name'?: string; 'Actual Rows'?: number; 'Rows Removed by Filter'?: number; Plans?: PlanNode[] };
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];
const typeOf = (v: unknown) => (Array.isArray(v) ? 'text[]' : typeof v === 'number' ? 'bigint' : 'text');
const literal = (client: pg.Client, v: unknown): string =>
  Array.isArray(v) ? `ARRAY[${v.map((x) => literal(client, x)).join(', ')}]::text[]` : typeof v === 'number' ? String(v) : client.escapeLiteral(String(v));

/** The scans in the plan of `q`'s statement, and how many rows they read (returned or filtered out). */
async function scans(url: string, q: FindTasksQuery, generic: boolean): Promise<{ indexes: string[]; seq: number; read: number }> {
  const { text, params } = listingSql(q);
  return withClient(url, async (client) => {
    let plan: PlanNode;
    if (generic) {
      await client.query('SET plan_cache_mode = force_generic_plan');
      await client.query(`PREPARE listing (${params.map(typeOf).join(', ')}) AS ${text}`);
      plan = (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE listing (${params.map((v) => literal(client, v)).join(', ')})`)).rows[0]['QUERY PLAN'][0].Plan;
    } else {
      plan = (await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params)).rows[0]['QUERY PLAN'][0].Plan;
    }
    const all = nodes(plan).filter((n) => n['Node Type'].includes('Scan') && !n['Node Type'].startsWith('Bitmap Heap'));
    return {
      indexes: all.flatMap((n) => (n['Index Name'] === undefined ? [] : [n['Index Name']])),
      seq: all.filter((n) => n['Node Type'] === 'Seq Scan').length,
      read: all.reduce((sum, n) => sum + (n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0), 0),
    };
  });
}

describe('an agent’s listing on PostgreSQL', () => {
  it('reads each term from its own index, never the whole table, custom plan or generic', async () => {
    const tm = freshManager();
    // 6,000 tasks that other agents completed (the history of a busy queue), then open ones, then the agent's own.
    for (let i = 0; i < 6000; i += 1000) await tm.createTasks(Array.from({ length: 1000 }, (_, j) => ({ title: `done ${i + j}` })), operator);
    // Their history, written directly: how they got there is not what is measured.
    await sql(tm.path, "UPDATE tasks SET state = 'completed', assignee = 'ag' || (id % 20)");
    await tm.createTasks(Array.from({ length: 600 }, (_, i) => ({ title: `open ${i}`, forAgent: i % 3 === 0 ? undefined : 'bob' })), operator);
    await tm.createTasks(Array.from({ length: 30 }, (_, i) => ({ title: `alice's ${i}`, forAgent: 'bob' })), agent('alice'));
    await sql(tm.path, 'ANALYZE tasks');

    const cases: Array<[string, FindTasksQuery, number]> = [
      // [what, query, at most this many rows read]
      ['an agent with no task lists the completed', { states: ['completed'], visibleTo: agent('newbie') }, 10],
      ['an agent with no task lists everything', { visibleTo: agent('newbie') }, 700],
      ['an agent lists its own', { states: ['pending'], visibleTo: agent('alice'), limit: 20 }, 700],
      ['a busy agent lists everything', { visibleTo: agent('ag3'), limit: 50 }, 800],
      ['a busy agent lists a state it has none of', { states: ['failed'], visibleTo: agent('ag3') }, 400],
    ];
    for (const [what, q, most] of cases) {
      for (const generic of [false, true]) {
        const s = await scans(tm.path, q, generic);
        const label = `${what} (${generic ? 'generic' : 'custom'}): ${JSON.stringify(s)}`;
        expect(s.seq, label).toBe(0);
        expect(s.indexes.filter((i) => i === 'tasks_pkey'), label).toEqual([]);
        expect(s.read, label).toBeLessThanOrEqual(most);
      }
    }
    // What it lists is still what it may read (the rule itself is checked in task-manager.visible-list).
    expect((await tm.findTasks({ states: ['completed'], visibleTo: agent('newbie') })).length).toBe(0);
    expect((await tm.findTasks({ states: ['completed'], visibleTo: agent('ag3'), limit: 1000 })).length).toBe(300);
    expect((await tm.findTasks({ states: ['pending'], visibleTo: agent('alice'), limit: 1000 })).length).toBe(230);
  });
});
