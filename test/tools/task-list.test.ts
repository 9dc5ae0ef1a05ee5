/**
 * task_list over many tasks with long titles, through a real MCP client. Titles are up to 500
 * characters: a page of 200 (or the default view's 50 and 50) could be over the tool's 64 KiB
 * output cap, which failed the call, and nothing paged past the first 200. A page now stops at
 * what fits and hands back a cursor; paging never shows a task the agent may not read.
 */
import { describe, expect, it } from 'vitest';
import { agent, freshManager } from '../helpers.js';
import { taskToolsClient } from './mcp-client.js';

type Text = { content: Array<{ text: string }>; isError?: boolean };
type Listed = { id: number; title: string };
// 500 characters that JSON writes as ~1,000 bytes (each `"` escaped), and 500 that UTF-8 writes as 1,500.
const quoted = (i: number) => `${i} `.padEnd(500, '"');
const wide = (i: number) => `${i} `.padEnd(500, 'é');

async function lister(name: string, tm: ReturnType<typeof freshManager>) {
  const client = await taskToolsClient(tm, name);
  return async (args: Record<string, unknown>) => {
    const out = (await client.callTool({ name: 'task_list', arguments: args })) as Text;
    expect(out.content[0]!.text.length).toBeLessThan(65_536);
    return { isError: out.isError === true, body: JSON.parse(out.content[0]!.text) as Record<string, unknown> };
  };
}

describe('task_list pages', () => {
  it('pages through 450 long-titled tasks by cursor, each answer under the output cap, each task once, and never shows another agent’s reserved task', async () => {
    const tm = freshManager();
    await tm.createTasks(
      Array.from({ length: 450 }, (_, i) => ({ title: i % 2 === 0 ? quoted(i) : wide(i) })),
      agent('alice'),
    );
    // Interleaved: reserved for bob, which alice may not read however she pages.
    await tm.createTasks(Array.from({ length: 40 }, (_, i) => ({ title: `bob's ${i}`, forAgent: 'bob' })), agent('carol'));
    await tm.createTasks(Array.from({ length: 10 }, (_, i) => ({ title: wide(1000 + i) })), agent('alice'));
    const mine = (await tm.findTasks({ states: ['pending'], creator: 'alice', limit: 1000 })).map((t) => t.id);
    expect(mine).toHaveLength(460);

    const list = await lister('alice', tm);
    const seen: number[] = [];
    let after: number | null = null;
    let pages = 0;
    do {
      const page = await list({ states: ['pending'], limit: 200, ...(after === null ? {} : { after }) });
      expect(page.isError, JSON.stringify(page.body).slice(0, 200)).toBe(false);
      const tasks = page.body.tasks as Listed[];
      expect(tasks.length).toBeGreaterThan(0);
      seen.push(...tasks.map((t) => t.id));
      after = page.body.more_after as number | null;
      if (after !== null) expect(after).toBe(tasks[tasks.length - 1]!.id);
      pages += 1;
    } while (after !== null && pages < 100);
    expect(seen).toEqual(mine);
    expect(pages).toBeGreaterThan(460 / 200 + 1); // the bytes, not the count, cut these pages

    // A page that ends on the limit says whether more follow.
    const exact = await list({ states: ['pending'], limit: 5, after: mine[454]! });
    expect((exact.body.tasks as Listed[]).map((t) => t.id)).toEqual(mine.slice(455));
    expect(exact.body.more_after).toBeNull();
    const short = await list({ states: ['pending'], limit: 2, after: mine[454]! });
    expect(short.body.more_after).toBe(mine[456]);
  });

  it('the default view fits what the agent holds and what it may claim in one answer, with a cursor for each list', async () => {
    const tm = freshManager();
    const created = await tm.createTasks(Array.from({ length: 120 }, (_, i) => ({ title: quoted(i) })), agent('alice'));
    // Alice held 60; every third of them failed since (still hers, no longer held).
    const held: number[] = [];
    for (const [i, c] of created.slice(0, 60).entries()) {
      const claim = (await tm.claimTask({ agent: 'alice', taskId: c.task.id }))!;
      if (i % 3 !== 1) held.push(c.task.id);
      else await tm.transitionTask({ taskId: claim.id, to: 'in_progress', actor: agent('alice'), claimToken: claim.claimToken, then: [{ to: 'failed', actor: agent('alice') }] });
    }
    const pendingIds = created.slice(60).map((c) => c.task.id);

    const list = await lister('alice', tm);
    const view = await list({});
    expect(view.isError, JSON.stringify(view.body).slice(0, 200)).toBe(false);
    const assigned = view.body.assigned_to_you as Listed[];
    const pending = view.body.pending as Listed[];
    expect(assigned.map((t) => t.id)).toEqual(held.slice(0, assigned.length));
    expect(pending.map((t) => t.id)).toEqual(pendingIds.slice(0, pending.length));
    expect(assigned.length + pending.length).toBeGreaterThan(40);
    expect(view.body.more_assigned_after).toBe(assigned[assigned.length - 1]!.id);
    expect(view.body.more_pending_after).toBe(pending[pending.length - 1]!.id);

    // Each cursor goes on with its own listing.
    const restPending = await list({ states: ['pending'], after: view.body.more_pending_after });
    expect((restPending.body.tasks as Listed[])[0]!.id).toBe(pendingIds[pending.length]);
    // The assigned list is of the held states (mine alone lists every state the agent held).
    const restMine = await list({ mine: true, states: ['claimed', 'in_progress', 'waiting', 'review'], after: view.body.more_assigned_after });
    expect((restMine.body.tasks as Listed[])[0]!.id).toBe(held[assigned.length]);

    // A short view has no cursors.
    const small = freshManager();
    await small.createTask({ title: 'one' }, agent('alice'));
    const one = await (await lister('alice', small))({});
    expect(one.body).toMatchObject({ pending: [{ title: 'one' }], assigned_to_you: [], more_pending_after: null, more_assigned_after: null });
  });

  it('refuses a cursor without the listing it pages, in one line, and an out-of-range one', async () => {
    const tm = freshManager();
    await tm.createTask({ title: 'one' }, agent('alice'));
    const list = await lister('alice', tm);
    const bare = await list({ after: 1 });
    expect(bare.isError).toBe(true);
    expect(bare.body.error).toMatchObject({ code: 'VALIDATION_FAILED', message: expect.stringMatching(/^task_list: after pages one listing[^\n]*$/) });
    const negative = await list({ states: ['pending'], after: -1 });
    expect(negative.isError).toBe(true);
    expect(negative.body.error).toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});
