/**
 * Seed 003's ticket card (DESIGN §9) for one ticket: raise it to urgent and page on-call,
 * the page needing an approval. The demo and the tests build their ticket runs from it.
 */
export interface TicketCardOptions {
  /** @defaultValue 'scripted' (the llm planner gets no script) */
  planner?: 'scripted' | 'llm';
  /** @defaultValue '30m' */
  expiresIn?: string;
  /** @defaultValue 'degraded' */
  onExpiry?: 'degraded' | 'failed';
}

export function ticketCard(ticket: string, opts: TicketCardOptions = {}): Record<string, unknown> {
  const planner = opts.planner ?? 'scripted';
  const card: Record<string, unknown> = {
    goal: `Raise ${ticket} to urgent and notify on-call`,
    planner,
    allowed_tools: ['get_ticket', 'update_ticket_priority', 'notify_oncall'],
    observe: { tool: 'get_ticket', args: { ticket_id: ticket } },
    scope: { write_ticket_ids: [ticket] },
    budget: { max_steps: 12, max_write_calls: 5, max_pending: 2, deadline: '10m' },
    // On expiry the page is skipped: then only notify_ok may fail for the run to end degraded.
    approval: { tools: ['notify_oncall'], expires_in: opts.expiresIn ?? '30m', on_expiry: opts.onExpiry ?? 'degraded', covers: ['notify_ok'] },
    final_state: { ticket: { tool: 'get_ticket', args: { ticket_id: ticket } } },
    acceptance: {
      checks: [
        { id: 'priority_ok', path: 'ticket.priority', equals: 'urgent' },
        { id: 'notify_ok', path: 'ticket.notified', equals: true },
        { id: 'tools_ok', tools_subset: true },
      ],
      manual: [],
    },
  };
  if (planner === 'scripted') {
    card.script = [
      { action: 'tool', tool: 'update_ticket_priority', args: { ticket_id: ticket, priority: 'urgent' } },
      { action: 'tool', tool: 'notify_oncall', args: { ticket_id: ticket, message: `${ticket} is now urgent` } },
      { action: 'done' },
    ];
  }
  return card;
}
