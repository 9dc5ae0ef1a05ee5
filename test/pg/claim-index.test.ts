/**
 * On PostgreSQL too, a daemon's pick reads the index of the tasks that carry a card (schema
 * version 4): 2,000 tasks waiting for agents are not in its way.
 */
import { describe, expect, it } from 'vitest';
import { pickSql } from '../../src/engine/postgres/claim.js';
import { freshManager, operator } from '../helpers.js';
import { sql } from './sql.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

/** The index names in the plan of `text`. */
async function indexesOf(url: string, text: string, params: unknown[]): Promise<string[]> {
  const [row] = await sql<{ 'QUERY PLAN': unknown }>(url, `EXPLAIN (FORMAT JSON) ${text}`, params);
  return [...JSON.stringify(row!['QUERY PLAN']).matchAll(/"Index Name":"(\w+)"/g)].map((m) => m[1]!);
}

describe('the daemon pick on PostgreSQL', () => {
  it('a daemon reads tasks_claimable_card, an agent tasks_claimable', async () => {
    const tm = freshManager();
    for (let i = 0; i < 2000; i += 500) {
      await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `for an agent ${i + j}`, priority: 5 })), operator);
    }
    await tm.createTask({ title: 'for a daemon', card: CARD }, operator);
    await sql(tm.path, 'ANALYZE tasks');
    const params = ['default', Date.now(), 'a', '[]'];
    expect(await indexesOf(tm.path, pickSql(true, 'id', false), params)).toEqual(['tasks_claimable_card']);
    expect(await indexesOf(tm.path, pickSql(false, 'id', false), params)).toEqual(['tasks_claimable']);
    await tm.close();
  });
});
