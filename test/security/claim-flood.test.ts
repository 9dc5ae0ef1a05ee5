/**
 * Claims an agent can slow for everyone. A claim reads the claimable tasks that require
 * capabilities by each requirement set the claimer's capabilities cover (claim-needs.ts); a
 * claimer offering more than MAX_LOOKED_UP walks them all in claim order instead, on SQLite
 * inside the write lock. So an agent that created thousands of tasks requiring a capability
 * and then claimed offering five others made each of its claims hold every writer up. An
 * agent's task_claim offers at most MAX_LOOKED_UP; operators' daemons and CLI may offer more.
 *
 * Attacked through a real MCP client, on both stores.
 */
import { describe, expect, it } from 'vitest';
import { MAX_LOOKED_UP } from '../../src/engine/index.js';
import { agent, freshManager, operator } from '../helpers.js';
import { taskToolsClient } from '../tools/mcp-client.js';

type Text = { content: Array<{ text: string }>; isError?: boolean };
const answer = (out: unknown) => JSON.parse((out as Text).content[0]!.text) as Record<string, unknown>;

describe('an agent’s claim cannot walk a flood', () => {
  it(`task_claim offering more than ${MAX_LOOKED_UP} capabilities is refused in one line and claims nothing; ${MAX_LOOKED_UP} take what they cover`, async () => {
    const tm = freshManager();
    // Mallory's flood: tasks requiring what her claim will leave out.
    await tm.createTasks(Array.from({ length: 500 }, (_, i) => ({ title: `needs magic ${i}`, requires: ['magic'] })), agent('mallory'));
    const real = (await tm.createTask({ title: 'needs a and b', requires: ['b', 'a'], priority: -1 }, operator)).task.id;
    const events = (await tm.stats()).lastEventId;
    const client = await taskToolsClient(tm, 'mallory');
    const five = ['a', 'b', 'c', 'd', 'e'];
    expect(five.length).toBe(MAX_LOOKED_UP + 1);
    const out = (await client.callTool({ name: 'task_claim', arguments: { capabilities: five } })) as Text;
    expect(out.isError).toBe(true);
    const err = answer(out).error as { code: string; message: string };
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toMatch(/capabilities/);
    expect(err.message).not.toContain('\n');
    expect((await tm.stats()).lastEventId).toBe(events);
    // Four: the sets they cover are looked up, and the task requiring two of them is hers.
    const claimed = answer(await client.callTool({ name: 'task_claim', arguments: { capabilities: ['d', 'b', 'c', 'a'] } })).claimed as { id: number };
    expect(claimed.id).toBe(real);
    // The library's claimer (an operator's daemon or CLI) may still offer more.
    expect(await tm.claimTask({ agent: 'daemon-1', capabilities: [...five, 'magic'] })).toMatchObject({ title: 'needs magic 0' });
  });
});
