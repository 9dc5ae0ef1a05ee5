/**
 * The ticket store on a SQLite store's connection: synchronous statements, each write in
 * one `BEGIN IMMEDIATE` transaction, so a read-modify-write sees no other writer.
 */
import { type SqliteTaskStore, spinOnBusy } from '../engine/index.js';
import { type TicketRow, type TicketStore, closeReceipt, demoTickets, noTicket, toTicket } from './ticket-store.js';

type Db = SqliteTaskStore['db'];

/** @internal The ticket store on one SQLite database handle. */
export function sqliteTicketStore(db: Db): TicketStore {
  const get = db.prepare<[string], TicketRow>('SELECT * FROM tickets WHERE id = ?');
  const list = db.prepare<[number], TicketRow>('SELECT * FROM tickets ORDER BY CAST(substr(id, 3) AS INTEGER) LIMIT ?');
  const seedOne = db.prepare("INSERT OR IGNORE INTO tickets (id, title, status, priority, customer_note, updated_at) VALUES (?, ?, 'open', 'normal', ?, ?)");
  const setPriority = db.prepare('UPDATE tickets SET priority = ?, version = version + 1, updated_at = ? WHERE id = ?');
  const notify = db.prepare('INSERT OR IGNORE INTO ticket_notifications (ticket_id, message, idempotency_key, created_at) VALUES (?, ?, ?, ?)');
  const markNotified = db.prepare('UPDATE tickets SET notified = 1, version = version + 1, updated_at = ? WHERE id = ? AND notified = 0');
  const close = db.prepare("UPDATE tickets SET status = 'closed', version = version + 1, updated_at = ? WHERE id = ? AND status = 'open'");
  const must = (id: string): TicketRow => {
    const row = get.get(id);
    if (row === undefined) throw noTicket(id);
    return row;
  };
  // The store's connection waits for the write lock itself (busy_timeout 0): so do these.
  const tx = <T>(fn: () => T): T => spinOnBusy(() => db.transaction(fn).immediate(), 5000);
  // Synchronous inside, as before; `async` turns a thrown error into a rejection.
  return {
    get: async (id) => toTicket(must(id)),
    list: async (limit = 200) => list.all(limit).map(toTicket),
    seed: async (now = Date.now()) =>
      tx(() => {
        let added = 0;
        for (const t of demoTickets()) added += seedOne.run(t.id, t.title, t.note, now).changes;
        return added;
      }),
    setPriority: async (id, priority) =>
      tx(() => {
        must(id);
        setPriority.run(priority, Date.now(), id);
        return toTicket(must(id));
      }),
    notify: async (id, message, key) =>
      tx(() => {
        must(id);
        const sent = notify.run(id, message, key, Date.now()).changes === 1;
        markNotified.run(Date.now(), id);
        return { ticket: toTicket(must(id)), sent, receipt: key };
      }),
    close: async (id, key) =>
      tx(() => {
        const before = must(id);
        close.run(Date.now(), id);
        const after = must(id);
        return { ticket: toTicket(after), closed_now: before.status === 'open', receipt: closeReceipt(id, key) };
      }),
  };
}
