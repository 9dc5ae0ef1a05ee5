/**
 * Claims an agent can slow for everyone. A claim reads the claimable tasks that require
 * capabilities by each requirement set the claimer's capabilities cover (claim-needs.ts): 2^n - 1
 * of them, each looked up twice, on SQLite inside the write lock; a claimer offering more than
 * MAX_LOOKED_UP (8) walks them all in claim order instead. So an agent that created thousands
 * of tasks requiring a capability and then claimed offering nine others would make each of
 * its claims hold every writer up, and offering eight, 510 lookups a claim. An agent's
 * task_claim offers at most AGENT_MAX_CAPABILITIES (4); operators' daemons and CLI may offer
 * more.
 *
 * Attacked through a real MCP client, on both stores.
 */
import { describe, expect, it } from 'vitest';
import { AGENT_MAX_CAPABILITIES, MAX_LOOKED_UP } from '../../src/engine/index.js';
import { startDaemon } from '../../src/workers/daemon.js';
import { agent, freshManager, operator } from '../helpers.js';
import { taskToolsClient } from '../tools/mcp-client.js';

type Text = { content: Array<{ text: string }>; isError?: boolean };
const answer = (out: unknown) => JSON.parse((out as Text).content[0]!.text) as Record<string, unknown>;

describe('an agent’s claim cannot walk a flood', () => {
  it(`task_claim offering more than ${AGENT_MAX_CAPABILITIES} capabilities is refused in one line and claims nothing; ${AGENT_MAX_CAPABILITIES} take what they cover`, async () => {
    const tm = freshManager();
    // Mallory's flood: tasks requiring what her claim will leave out.
    await tm.createTasks(Array.from({ length: 500 }, (_, i) => ({ title: `needs magic ${i}`, requires: ['magic'] })), agent('mallory'));
    const real = (await tm.createTask({ title: 'needs a and b', requires: ['b', 'a'], priority: -1 }, operator)).task.id;
    const events = (await tm.stats()).lastEventId;
    const client = await taskToolsClient(tm, 'mallory');
    const five = ['a', 'b', 'c', 'd', 'e'];
    expect(five.length).toBe(AGENT_MAX_CAPABILITIES + 1);
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
    // The library's claimer (an operator's daemon or CLI) may still offer more: up to
    // MAX_LOOKED_UP looked up by set, past it walked; both take what they cover, in order.
    const eight = [...five, 'f', 'g', 'magic'];
    expect(eight.length).toBe(MAX_LOOKED_UP);
    expect(await tm.claimTask({ agent: 'daemon-1', capabilities: eight })).toMatchObject({ title: 'needs magic 0' });
    expect(await tm.claimTask({ agent: 'daemon-1', capabilities: [...eight, 'h'] })).toMatchObject({ title: 'needs magic 1' });
  });

  it(`a daemon offering more than ${MAX_LOOKED_UP} capabilities says at its start that its claims walk; ${MAX_LOOKED_UP} (counted once each) say nothing`, async () => {
    const tm = freshManager();
    for (const n of [MAX_LOOKED_UP, MAX_LOOKED_UP + 1]) {
      const caps = Array.from({ length: n }, (_, i) => `cap${i}`);
      const lines: string[] = [];
      const d = await startDaemon({ dbPath: tm.path, workers: 1, capabilities: [...caps, caps[0]!], log: (line) => lines.push(line) });
      await d.stop();
      const warned = lines.filter((l) => l.includes('capabilities offered'));
      expect(warned, lines.join('\n')).toHaveLength(n > MAX_LOOKED_UP ? 1 : 0);
      if (n > MAX_LOOKED_UP) expect(warned[0]).toMatch(/each claim walks/);
    }
  });
});
