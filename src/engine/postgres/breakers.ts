/**
 * Tool circuit breakers on PostgreSQL, shared by every worker of every process: closed →
 * open after `threshold` consecutive failures → half-open after the cooldown, when exactly
 * one caller is granted a probe; the probe's result closes or re-opens the breaker.
 *
 * Concurrency: `acquire` and `record` read the breaker's row `FOR UPDATE` and write it back
 * under that lock, so two processes granting the probe or counting a failure at once are
 * serialized: the second reads what the first wrote (a half-open breaker with a probe out,
 * one failure more). A failure on a tool with no row yet inserts a clean row first (`ON
 * CONFLICT DO NOTHING` waits for a concurrent insert of the same tool), so there is always a
 * row to lock and no count is lost to two inserts.
 */
import { systemActor } from '../actors.js';
import type { BreakerPolicy, BreakerRow, BreakerState, BreakerVerdict } from '../run-store.js';
import type { TaskEvent } from '../types.js';
import type { Query } from './connection.js';
import { appendEvent } from './moves.js';
import { type BreakerStep, acquireBreaker, recordBreaker } from '../breaker-rules.js';

const BREAKER = systemActor('breaker');

interface Row {
  tool: string;
  state: BreakerState;
  failures: number;
  opened_at: number | null;
  probe_until: number | null;
}

const lock = async (q: Query, tool: string): Promise<Row | undefined> =>
  (await q<Row & Record<string, unknown>>('SELECT tool, state, failures, opened_at, probe_until FROM tool_breakers WHERE tool = $1 FOR UPDATE', [tool]))[0];

// The row exists (acquire, record) and is locked: one UPDATE writes it back.
const put = (q: Query, r: Row, now: number) =>
  q('UPDATE tool_breakers SET state = $2, failures = $3, opened_at = $4, probe_until = $5, updated_at = $6 WHERE tool = $1', [
    r.tool,
    r.state,
    r.failures,
    r.opened_at,
    r.probe_until,
    now,
  ]);

/** Writes what a rule of breaker-rules.ts decided (the row is locked, or was just inserted clean). */
async function apply(q: Query, step: BreakerStep<unknown>, taskId: number | null, now: number, events: TaskEvent[]): Promise<void> {
  if (step.write !== undefined) await put(q, step.write, now);
  if (step.event !== undefined) events.push(await appendEvent(q, taskId, step.event.type, BREAKER, step.event.data, now));
}

export const pgBreakers = {
  /** A read outside any transaction: true when the breaker is closed with no failures (nothing to write). */
  async clean(q: Query, tool: string): Promise<boolean> {
    const [row] = await q<Row & Record<string, unknown>>('SELECT state, failures FROM tool_breakers WHERE tool = $1', [tool]);
    return row === undefined || (row.state === 'closed' && row.failures === 0);
  },

  async acquire(q: Query, tool: string, policy: BreakerPolicy, now: number, events: TaskEvent[]): Promise<BreakerVerdict> {
    const step = acquireBreaker(await lock(q, tool), policy, now);
    await apply(q, step, null, now, events);
    return step.result;
  },

  async record(q: Query, tool: string, ok: boolean, policy: BreakerPolicy, taskId: number | null, now: number, events: TaskEvent[]): Promise<BreakerState> {
    if (!ok) {
      // A failure on a tool with no row yet: a clean row first, so there is always one to lock (no count lost).
      await q("INSERT INTO tool_breakers (tool, state, failures, updated_at) VALUES ($1, 'closed', 0, $2) ON CONFLICT (tool) DO NOTHING", [tool, now]);
    }
    const step = recordBreaker(await lock(q, tool), tool, ok, policy, now);
    await apply(q, step, taskId, now, events);
    return step.result;
  },

  async list(q: Query): Promise<BreakerRow[]> {
    // COLLATE "C": byte order, as SQLite sorts text, whatever the database's collation.
    const rows = await q<Row & Record<string, unknown>>('SELECT tool, state, failures, opened_at FROM tool_breakers ORDER BY tool COLLATE "C"');
    return rows.map((r) => ({ tool: r.tool, state: r.state, failures: r.failures, openedAt: r.opened_at }));
  },
};
