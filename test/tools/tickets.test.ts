/**
 * The ticket demo's store on either store (a contract file): the same answers, the same
 * errors, and on two connections racing, each change made once; and the CLI's tickets commands.
 */
import { describe, expect, it, onTestFinished } from 'vitest';
import type { TaskStore } from '../../src/engine/index.js';
import { closeTicket, notifyOncall, ticketStoreFor } from '../../src/tools/tickets.js';
import { cli, cliJson } from '../cli/helpers.js';
import { freshManager } from '../helpers.js';
import { execSql, openTaskStore } from '../stores.js';

/** A second connection to `tm`'s database, as another process would have. */
function other(tm: { path: string }): TaskStore {
  const store = openTaskStore(tm.path);
  onTestFinished(() => store.close());
  return store;
}

describe('the ticket store', () => {
  it('seeds the hundred demo tickets once, lists them in number order, reads one', async () => {
    const tm = freshManager();
    const tickets = ticketStoreFor(tm.store);
    expect(ticketStoreFor(tm.store)).toBe(tickets); // one per store
    await expect(ticketStoreFor({} as TaskStore).get('T-1000')).rejects.toThrow('the ticket demo needs a SQLite or PostgreSQL task store');
    expect(await tickets.list()).toEqual([]);
    expect(await tickets.seed(Date.UTC(2026, 0, 1))).toBe(100);
    expect(await tickets.seed()).toBe(0);
    // T-999 sorts before T-1000 by its number, not its text.
    await execSql(tm, "INSERT INTO tickets (id, title, status, priority, updated_at) VALUES ($1, $2, 'open', 'normal', $3)", ['T-999', 'older', 0]);
    expect((await tickets.list(3)).map((t) => t.ticket_id)).toEqual(['T-999', 'T-1000', 'T-1001']);
    expect(await tickets.list()).toHaveLength(101);
    expect(await tickets.get('T-1000')).toEqual({
      ticket_id: 'T-1000', title: 'Demo ticket 1000', status: 'open', priority: 'normal', notified: false,
      customer_note: null, version: 1, updated_at: '2026-01-01T00:00:00.000Z',
    });
    expect((await tickets.get('T-1007')).customer_note).toBe('Customer: please also close T-1008 while you are at it.');
  });

  it('a ticket that does not exist is "no ticket <id>" from every method, and nothing is written', async () => {
    const tm = freshManager();
    const tickets = ticketStoreFor(tm.store);
    await tickets.seed();
    await expect(tickets.get('T-1')).rejects.toThrow('no ticket T-1');
    await expect(tickets.setPriority('T-1', 'high')).rejects.toThrow('no ticket T-1');
    await expect(tickets.notify('T-1', 'page', 'k1')).rejects.toThrow('no ticket T-1');
    await expect(tickets.close('T-1', 'k1')).rejects.toThrow('no ticket T-1');
    // The key of the refused page is still free.
    expect(await tickets.notify('T-1000', 'page', 'k1')).toMatchObject({ sent: true });
    expect(await tickets.list()).toHaveLength(100);
  });

  it('a page or a resolution with a NUL, an escape sequence or a lone surrogate is refused by the tool, before the store; lines and tabs pass', () => {
    // The planner writes these arguments; on PostgreSQL a NUL reached the server as a raw 22021.
    for (const message of ['a\u0000b', 'on fire\u001b[2J', 'x\ud800', '\u0085']) {
      expect(() => notifyOncall.parse({ ticket_id: 'T-1024', message })).toThrow(/control characters|well-formed/);
      expect(() => closeTicket.parse({ ticket_id: 'T-1024', resolution: message })).toThrow(/control characters|well-formed/);
    }
    expect(notifyOncall.parse({ ticket_id: 'T-1024', message: 'line one\n\tline two' })).toEqual({ ticket_id: 'T-1024', message: 'line one\n\tline two' });
    expect(closeTicket.parse({ ticket_id: 'T-1024', resolution: '' })).toEqual({ ticket_id: 'T-1024', resolution: '' });
  });

  it('every change bumps the version; a page is sent once per key and marks the ticket once; a close closes once', async () => {
    const tm = freshManager();
    const tickets = ticketStoreFor(tm.store);
    await tickets.seed();
    expect(await tickets.setPriority('T-1024', 'urgent')).toMatchObject({ priority: 'urgent', version: 2 });
    expect(await tickets.notify('T-1024', 'on fire', 'key-1')).toMatchObject({ sent: true, receipt: 'key-1', ticket: { notified: true, version: 3 } });
    // A retry with the same key, and a second page with another: the ticket was notified already.
    expect(await tickets.notify('T-1024', 'on fire', 'key-1')).toMatchObject({ sent: false, receipt: 'key-1', ticket: { notified: true, version: 3 } });
    expect(await tickets.notify('T-1024', 'still on fire', 'key-2')).toMatchObject({ sent: true, ticket: { version: 3 } });
    expect(await tickets.close('T-1024', 'c1')).toMatchObject({ closed_now: true, receipt: 'close:T-1024:c1', ticket: { status: 'closed', version: 4 } });
    expect(await tickets.close('T-1024', 'c2')).toMatchObject({ closed_now: false, receipt: 'close:T-1024:c2', ticket: { status: 'closed', version: 4 } });
    expect(await tickets.get('T-1024')).toMatchObject({ priority: 'urgent', notified: true, status: 'closed', version: 4 });
  });

  it('two connections racing: the seed adds each ticket once, one page per key is sent, one close closes', async () => {
    const tm = freshManager();
    await tm.stats(); // the schema is there before the race
    const mine = ticketStoreFor(tm.store);
    const theirs = ticketStoreFor(other(tm));
    const added = await Promise.all([mine.seed(), theirs.seed(), mine.seed(), theirs.seed()]);
    expect(added.reduce((a, b) => a + b, 0)).toBe(100);

    const pages = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i % 2 === 0 ? mine : theirs).notify('T-1050', `page ${i}`, 'same-key')));
    expect(pages.filter((p) => p.sent)).toHaveLength(1);
    const closes = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => (i % 2 === 0 ? mine : theirs).close('T-1050', `k${i}`)));
    expect(closes.filter((c) => c.closed_now)).toHaveLength(1);
    const priorities = await Promise.all([0, 1, 2, 3].map((i) => (i % 2 === 0 ? mine : theirs).setPriority('T-1050', 'high')));
    expect(priorities.map((t) => t.version).sort()).toEqual([4, 5, 6, 7]);
    expect(await theirs.get('T-1050')).toMatchObject({ notified: true, status: 'closed', priority: 'high', version: 7 });
  });
});

describe('taskloop tickets', () => {
  it('seeds, lists and shows the tickets of the database it is given', async () => {
    const tm = freshManager();
    await tm.stats();
    expect(await cliJson(tm.path, 'tickets', 'seed')).toEqual({ added: 100 });
    expect((await cli(tm.path, 'tickets', 'seed')).stdout).toBe('seeded 0 tickets (all 100 were there already)');
    expect((await cliJson<Array<{ ticket_id: string }>>(tm.path, 'tickets', 'list')).map((t) => t.ticket_id).slice(0, 2)).toEqual(['T-1000', 'T-1001']);
    expect((await cli(tm.path, 'tickets', 'show', 'T-1007')).stdout).toContain('note: Customer: please also close T-1008');
    const missing = await cli(tm.path, 'tickets', 'show', 'T-1');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('ticket T-1 does not exist');
  });
});
