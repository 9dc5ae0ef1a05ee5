/** `taskloop tickets seed | list | show ID`: the ticket demo's data, for an operator to look at. */
import type { Command } from 'commander';
import { TICKET_ID, type Ticket, ticketStoreFor } from '../tools/tickets.js';
import { EngineError } from '../engine/index.js';
import type { CliContext } from './context.js';
import type { Run } from './task-commands.js';

const store = (ctx: CliContext) => ticketStoreFor(ctx.manager().store);
const line = (t: Ticket) => `${t.ticket_id.padEnd(7)} ${t.status.padEnd(6)} ${t.priority.padEnd(6)} ${t.notified ? 'notified' : '-'.padEnd(8)}  ${t.title}`;

export function registerTicketCommands(program: Command, run: Run): void {
  const tickets = program.command('tickets').description('the ticket demo’s tickets');
  tickets
    .command('seed')
    .description('create tickets T-1000 … T-1099 (open, priority normal); running it again changes nothing')
    .action(async (_o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const added = await store(ctx).seed();
        ctx.out({ added }, () => `seeded ${added} tickets${added === 0 ? ' (all 100 were there already)' : ''}`);
      }),
    );
  tickets
    .command('list')
    .description('list the tickets')
    .action(async (_o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const all = await store(ctx).list();
        ctx.out(all, () => (all.length === 0 ? 'no tickets (taskloop tickets seed creates them)' : all.map(line).join('\n')));
      }),
    );
  tickets
    .command('show <id>')
    .description('one ticket')
    .action(async (id: string, _o, cmd: Command) =>
      run(cmd, async (ctx) => {
        const parsed = TICKET_ID.safeParse(id);
        if (!parsed.success) throw new EngineError('VALIDATION_FAILED', `ticket id: '${id}' is not a ticket id such as T-1024`);
        let t: Ticket;
        try {
          t = await store(ctx).get(id);
        } catch {
          throw new EngineError('VALIDATION_FAILED', `ticket ${id} does not exist (taskloop tickets seed creates T-1000 … T-1099)`);
        }
        ctx.out(t, () => `${line(t)}\n  version ${t.version}, updated ${t.updated_at}${t.customer_note === null ? '' : `\n  note: ${t.customer_note}`}`);
      }),
    );
}
