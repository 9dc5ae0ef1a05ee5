/**
 * The ticket store on a PostgreSQL store: the same statements as tickets-sqlite.ts, for
 * many processes at once. SQLite had one writer at a time; here each read-modify-write is
 * one atomic statement (`UPDATE … RETURNING`, `INSERT … ON CONFLICT DO NOTHING`) or runs
 * under the ticket's row lock (`FOR UPDATE`). Writes go through the store's `write`, which
 * may run a body again after a serialization failure: each body builds its result afresh.
 * Times are the store's clock (the database's, or the test clock), not this process's.
 */
import type { PgQuery, PgTaskStore } from '../engine/index.js';
import { type TicketRow, type TicketStore, closeReceipt, demoTickets, noTicket, toTicket } from './ticket-store.js';

/** The ticket, locked until the transaction ends: a concurrent notify or close of it waits here. */
async function lockTicket(q: PgQuery, id: string): Promise<TicketRow> {
  const [row] = await q<TicketRow>('SELECT * FROM tickets WHERE id = $1 FOR UPDATE', [id]);
  if (row === undefined) throw noTicket(id);
  return row;
}

/** @internal The ticket store on a PostgreSQL task store's connection. */
export function pgTicketStore(store: PgTaskStore): TicketStore {
  const { conn } = store;
  const write = async <T>(what: string, body: (q: PgQuery, now: number) => Promise<T>): Promise<T> => (await store.write(`tickets ${what}`, (q, now) => body(q, now))).value;

  return {
    get: (id) =>
      store.read(async () => {
        const [row] = await conn.query<TicketRow>('SELECT * FROM tickets WHERE id = $1', [id]);
        if (row === undefined) throw noTicket(id);
        return toTicket(row);
      }),
    list: (limit = 200) =>
      store.read(async () => (await conn.query<TicketRow>('SELECT * FROM tickets ORDER BY CAST(substr(id, 3) AS INTEGER) LIMIT $1', [limit])).map(toTicket)),
    // One statement: a seed racing another adds each ticket once (the second waits on the
    // primary key for the first to commit, then does nothing for that id).
    seed: (at) =>
      write('seed', async (q, now) => {
        const all = demoTickets();
        const added = await q(
          `INSERT INTO tickets (id, title, status, priority, customer_note, updated_at)
           SELECT id, title, 'open', 'normal', note, $4 FROM unnest($1::text[], $2::text[], $3::text[]) AS t (id, title, note)
           ON CONFLICT (id) DO NOTHING RETURNING id`,
          [all.map((t) => t.id), all.map((t) => t.title), all.map((t) => t.note), at ?? now],
        );
        return added.length;
      }),
    // One atomic statement: two at once each bump the version, the later priority wins, as on SQLite.
    setPriority: (id, priority) =>
      write('set priority', async (q, now) => {
        const [row] = await q<TicketRow>('UPDATE tickets SET priority = $1, version = version + 1, updated_at = $2 WHERE id = $3 RETURNING *', [priority, now, id]);
        if (row === undefined) throw noTicket(id);
        return toTicket(row);
      }),
    // Under the ticket's lock, so the page, the notified flag and the ticket returned belong
    // together; the unique idempotency key alone already keeps a retried page from being sent twice.
    notify: (id, message, key) =>
      write('notify', async (q, now) => {
        await lockTicket(q, id);
        const sent = await q(
          'INSERT INTO ticket_notifications (ticket_id, message, idempotency_key, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id',
          [id, message, key, now],
        );
        const [marked] = await q<TicketRow>('UPDATE tickets SET notified = 1, version = version + 1, updated_at = $1 WHERE id = $2 AND notified = 0 RETURNING *', [now, id]);
        const ticket = marked ?? (await lockTicket(q, id));
        return { ticket: toTicket(ticket), sent: sent.length === 1, receipt: key };
      }),
    // Under the ticket's lock: of two closes at once, exactly one says `closed_now`.
    close: (id, key) =>
      write('close', async (q, now) => {
        const before = await lockTicket(q, id);
        const [closed] = await q<TicketRow>("UPDATE tickets SET status = 'closed', version = version + 1, updated_at = $1 WHERE id = $2 AND status = 'open' RETURNING *", [now, id]);
        return { ticket: toTicket(closed ?? before), closed_now: before.status === 'open', receipt: closeReceipt(id, key) };
      }),
  };
}
