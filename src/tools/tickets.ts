/**
 * The ticket demo (seed 003/004): tickets in the same database as the tasks. Write tools
 * name their target (`ticket_id`, scope key `write_ticket_ids`), so a card can only touch
 * the tickets it lists. `notify_oncall` and `close_ticket` are high risk: each call needs
 * an approval. Requires `services.tickets` (a TicketStore: `ticketStoreFor` the host's store).
 */
import { z } from 'zod/v4';
import { LONE_SURROGATE } from '../engine/text.js';
import type { PgTaskStore, SqliteTaskStore, TaskStore } from '../engine/index.js';
import { type Tool, type ToolContext, defineTool } from './registry.js';
import type { TicketStore } from './ticket-store.js';
import { pgTicketStore } from './tickets-pg.js';
import { sqliteTicketStore } from './tickets-sqlite.js';

export type { Ticket, TicketStore } from './ticket-store.js';

export const TICKET_ID = z.string().regex(/^T-\d{1,6}$/, 'a ticket id such as T-1024');
const PRIORITY = z.enum(['low', 'normal', 'high', 'urgent']);

const stores = new WeakMap<TaskStore, TicketStore>();

/** For a store of neither adapter: the hosts build it at start-up, the ticket tools fail when called. */
function noTickets(): TicketStore {
  const refuse = async (): Promise<never> => {
    throw new Error('the ticket demo needs a SQLite or PostgreSQL task store');
  };
  return { get: refuse, list: refuse, seed: refuse, setPriority: refuse, notify: refuse, close: refuse };
}

/**
 * @internal The ticket store in the database of a task store, SQLite's or PostgreSQL's (one
 * per store: SQLite's prepares its statements once). Any other store has no ticket tables.
 */
export function ticketStoreFor(store: TaskStore): TicketStore {
  let tickets = stores.get(store);
  if (tickets !== undefined) return tickets;
  if ('db' in store) tickets = sqliteTicketStore((store as SqliteTaskStore).db);
  else if ('conn' in store && 'write' in store) tickets = pgTicketStore(store as PgTaskStore);
  else tickets = noTickets();
  stores.set(store, tickets);
  return tickets;
}

function tickets(ctx: ToolContext): TicketStore {
  const store = ctx.services.tickets as TicketStore | undefined;
  if (store === undefined) throw new Error('ticket tools need services.tickets');
  return store;
}

const target = { arg: 'ticket_id', scope: 'write_ticket_ids' };

export const getTicket = defineTool({
  name: 'get_ticket',
  description: 'Read a ticket: status, priority, whether on-call was notified, the customer note.',
  kind: 'read',
  args: z.strictObject({ ticket_id: TICKET_ID }),
  execute: async ({ ticket_id }, ctx) => tickets(ctx).get(ticket_id),
});

export const updateTicketPriority = defineTool({
  name: 'update_ticket_priority',
  description: 'Set the priority of a ticket in scope.',
  kind: 'write',
  idempotent: true,
  target,
  args: z.strictObject({ ticket_id: TICKET_ID, priority: PRIORITY }),
  execute: async ({ ticket_id, priority }, ctx) => tickets(ctx).setPriority(ticket_id, priority),
});

/**
 * What a page says: lines of text. No control characters but line breaks and tabs (a page is
 * read on a pager, and PostgreSQL stores no NUL), no lone surrogates.
 */
const pageText = (min: number) =>
  z
    .string()
    .min(min)
    .max(1000)
    .refine((m) => !/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(m), 'must not contain control characters but line breaks and tabs')
    .refine((m) => !LONE_SURROGATE.test(m), 'must be well-formed Unicode (no lone surrogate)');

export const notifyOncall = defineTool({
  name: 'notify_oncall',
  description: 'Page the on-call engineer about a ticket in scope (high risk: needs an approval).',
  kind: 'write',
  risk: 'high',
  idempotent: true,
  target,
  args: z.strictObject({ ticket_id: TICKET_ID, message: pageText(1) }),
  execute: async ({ ticket_id, message }, ctx) => tickets(ctx).notify(ticket_id, message, ctx.idempotencyKey),
});

export const closeTicket = defineTool({
  name: 'close_ticket',
  description: 'Close a ticket in scope (high risk: needs an approval). Returns a receipt.',
  kind: 'write',
  risk: 'high',
  idempotent: true,
  target,
  args: z.strictObject({ ticket_id: TICKET_ID, resolution: pageText(0).optional() }),
  execute: async ({ ticket_id }, ctx) => tickets(ctx).close(ticket_id, ctx.idempotencyKey),
});

export const ticketTools: Tool[] = [getTicket, updateTicketPriority, notifyOncall, closeTicket];
