/**
 * task_get on a task with a long history. A run of 200 steps gives its task ~400 events
 * (~185 KB on the wire): read whole, task_get was refused over the 64 KB output cap on
 * exactly the tasks whose history an agent wants, after reading all of it. It now answers
 * with a page of the newest events and a cursor to the page before, through a real MCP
 * client, as the task's creator (who sees its runs).
 */
import { describe, expect, it } from 'vitest';
import { toWireEvent } from '../../src/engine/index.js';
import { eventPage } from '../../src/tools/task-tools.js';
import { agent, freshManager } from '../helpers.js';
import { card, drive, harness, loopContext } from '../workers/harness.js';
import { taskToolsClient } from './mcp-client.js';

type Text = { content: Array<{ text: string }>; isError?: boolean };

describe('task_get on a long task', () => {
  it('answers with the newest page of events and pages back through every one, each answer under the output cap', async () => {
    const h = harness();
    const script = [...Array.from({ length: 200 }, (_, i) => ({ action: 'tool', tool: 'echo', args: { text: `step ${i} ${'x'.repeat(100)}` } })), { action: 'done' }];
    const long = (await h.tm.createTask({ title: 'long', card: card({ allowed_tools: ['echo'], script, budget: { max_steps: 300 } }) }, agent('alice'))).task;
    const claim = (await h.tm.claimTask({ agent: 'worker', taskId: long.id, start: true }))!;
    expect((await drive(loopContext(h, claim))).result.phase).toBe('completed');
    const all = (await h.tm.getTask(long.id, { as: agent('alice') })).events.map(toWireEvent);
    expect(JSON.stringify(all).length).toBeGreaterThan(65_536);

    const client = await taskToolsClient(h.tm, 'alice');
    const get = async (args: Record<string, unknown>) => {
      const out = (await client.callTool({ name: 'task_get', arguments: { task_id: long.id, ...args } })) as Text;
      expect(out.isError, out.content[0]!.text.slice(0, 200)).not.toBe(true);
      expect(out.content[0]!.text.length).toBeLessThan(65_536);
      return JSON.parse(out.content[0]!.text) as { state: string; events: Array<{ id: number; type: string }>; more_events_before: number | null };
    };

    const first = await get({});
    expect(first.state).toBe('completed');
    expect(first.events).toHaveLength(50);
    expect(first.events.map((e) => e.id)).toEqual(all.slice(-50).map((e) => e.id));
    expect(first.more_events_before).toBe(first.events[0]!.id);

    const paged: number[] = [];
    let before: number | null = null;
    let pages = 0;
    do {
      const page = await get({ events_limit: 200, ...(before === null ? {} : { events_before: before }) });
      paged.unshift(...page.events.map((e) => e.id));
      before = page.more_events_before;
      pages += 1;
    } while (before !== null && pages < 50);
    expect(paged).toEqual(all.map((e) => e.id));
    expect(pages).toBeGreaterThan(all.length / 200); // the bytes, not the count, cut these pages
  });

  it('shows an event too big for a page of its own without its data, so paging goes on past it', () => {
    const e = (id: number, bytes: number) => ({ id, task_id: 1, type: 'x', actor: 'a', actor_role: 'agent' as const, data: { b: 'y'.repeat(bytes) }, created_at: '' });
    const huge = eventPage([e(1, 10), e(2, 50_000)], 50, 30_000);
    expect(huge.shown.map((x) => [x.id, x.data])).toEqual([[2, { omitted_bytes: expect.any(Number) }]]);
    expect(huge.more).toBe(true);
    const fits = eventPage([e(1, 10), e(2, 10)], 50, 30_000);
    expect(fits).toEqual({ shown: [e(1, 10), e(2, 10)], more: false });
    const full = eventPage([e(1, 10_000), e(2, 10_000), e(3, 10_000)], 50, 25_000);
    expect(full.shown.map((x) => x.id)).toEqual([2, 3]);
    expect(full.more).toBe(true);
  });
});

describe('a task with a big card, through MCP', () => {
  it('is created, claimed with its claim_token, read whole with events, and moved: no answer is dropped after its write took effect', async () => {
    const tm = freshManager();
    const alice = await taskToolsClient(tm, 'alice');
    const bob = await taskToolsClient(tm, 'bob');
    const call = async (client: typeof alice, name: string, args: Record<string, unknown>) => {
      const out = (await client.callTool({ name, arguments: args })) as Text;
      expect(out.isError, out.content[0]!.text.slice(0, 200)).not.toBe(true);
      const body = JSON.parse(out.content[0]!.text) as Record<string, unknown>;
      expect(body.output_dropped, name).toBeUndefined();
      return body;
    };
    // 200 KB of card: the work's context, as an operator or an agent may write it (the limit is 256 KiB).
    const card = { goal: 'summarise', context: 'é'.repeat(100_000) };
    const created = await call(alice, 'task_create', { title: 'big', card });
    expect(created).toMatchObject({ title: 'big', card, created: true });
    const claimed = (await call(bob, 'task_claim', {})).claimed as { id: number; claim_token: string; card: unknown };
    expect(claimed).toMatchObject({ id: created.id, card });
    expect(typeof claimed.claim_token).toBe('string');
    const read = await call(bob, 'task_get', { task_id: claimed.id });
    expect(read).toMatchObject({ card, state: 'claimed' });
    expect((read.events as unknown[]).length).toBeGreaterThan(0);
    expect(await call(bob, 'task_transition', { task_id: claimed.id, to: 'in_progress', claim_token: claimed.claim_token })).toMatchObject({ state: 'in_progress', card });
    expect(await call(alice, 'task_cancel', { task_id: claimed.id })).toMatchObject({ state: 'cancelled' });
  });
});
