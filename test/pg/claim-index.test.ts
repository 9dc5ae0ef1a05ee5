/**
 * On PostgreSQL too, a daemon's pick reads the index of the tasks that carry a card (schema
 * version 4): 2,000 tasks waiting for agents are not in its way.
 */
import { describe, expect, it } from 'vitest';
import { pickOpening, pickSql } from '../../src/engine/postgres/claim.js';
import { freshManager, operator } from '../helpers.js';
import { sql, withClient } from './sql.js';

const CARD = { goal: 'g', planner: 'scripted', allowed_tools: ['noop'], budget: { max_steps: 3 }, acceptance: { checks: [{ id: 'tools_ok', tools_subset: true }] }, script: [{ action: 'done' }] };

/**
 * The index names in the plan of `text` as a claim runs it: a prepared statement, whose plan
 * after a few executions is the generic one (forced here).
 */
async function indexesOf(url: string, text: string, params: unknown[], types: string[]): Promise<string[]> {
  return withClient(url, async (client) => {
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE pick (${types.join(', ')}) AS ${text}`);
    const literals = params.map((v) => (v === null ? 'NULL' : typeof v === 'number' ? String(v) : client.escapeLiteral(String(v)))).join(', ');
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE pick (${literals})`);
    return [...JSON.stringify(rows[0]['QUERY PLAN']).matchAll(/"Index Name":"(\w+)"/g)].map((m) => m[1]!);
  });
}

describe('the daemon pick on PostgreSQL', () => {
  it('a daemon reads tasks_claimable_card, an agent tasks_claimable', async () => {
    const tm = freshManager();
    for (let i = 0; i < 2000; i += 500) {
      await tm.createTasks(Array.from({ length: 500 }, (_, j) => ({ title: `for an agent ${i + j}`, priority: 5 })), operator);
    }
    await tm.createTask({ title: 'for a daemon', card: CARD }, operator);
    await sql(tm.path, 'ANALYZE tasks');
    // The claim's own pick (its first round trip, FOR UPDATE SKIP LOCKED), and the look before it.
    for (const withCard of [true, false]) {
      const opening = pickOpening({ agent: 'a', withCard }, undefined);
      const index = withCard ? 'tasks_claimable_card' : 'tasks_claimable';
      expect(await indexesOf(tm.path, opening.sql, opening.args, opening.types)).toEqual([index]);
      expect(await indexesOf(tm.path, pickSql(withCard, 'id', false), ['default', Date.now(), 'a', '[]'], ['text', 'bigint', 'text', 'text'])).toEqual([index]);
    }
    await tm.close();
  });
});
