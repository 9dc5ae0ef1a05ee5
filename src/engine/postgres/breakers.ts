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

export const pgBreakers = {
  /** A read outside any transaction: true when the breaker is closed with no failures (nothing to write). */
  async clean(q: Query, tool: string): Promise<boolean> {
    const [row] = await q<Row & Record<string, unknown>>('SELECT state, failures FROM tool_breakers WHERE tool = $1', [tool]);
    return row === undefined || (row.state === 'closed' && row.failures === 0);
  },

  async acquire(q: Query, tool: string, policy: BreakerPolicy, now: number, events: TaskEvent[]): Promise<BreakerVerdict> {
    const row = await lock(q, tool);
    if (row === undefined || row.state === 'closed') return { allowed: true, state: 'closed', probe: false };
    const cooled = row.state === 'open' && now >= (row.opened_at ?? 0) + policy.cooldownMs;
    const probeLost = row.state === 'half_open' && now > (row.probe_until ?? 0);
    if (!cooled && !probeLost) return { allowed: false, state: row.state, probe: false };
    await put(q, { ...row, state: 'half_open', probe_until: now + policy.probeTimeoutMs }, now);
    events.push(await appendEvent(q, null, 'breaker.half_opened', BREAKER, { tool }, now));
    return { allowed: true, state: 'half_open', probe: true };
  },

  async record(q: Query, tool: string, ok: boolean, policy: BreakerPolicy, taskId: number | null, now: number, events: TaskEvent[]): Promise<BreakerState> {
    if (!ok) {
      await q("INSERT INTO tool_breakers (tool, state, failures, updated_at) VALUES ($1, 'closed', 0, $2) ON CONFLICT (tool) DO NOTHING", [tool, now]);
    }
    const row = (await lock(q, tool)) ?? { tool, state: 'closed' as BreakerState, failures: 0, opened_at: null, probe_until: null };
    if (ok) {
      if (row.state === 'closed' && row.failures === 0) return 'closed';
      await put(q, { tool, state: 'closed', failures: 0, opened_at: null, probe_until: null }, now);
      if (row.state !== 'closed') events.push(await appendEvent(q, taskId, 'breaker.closed', BREAKER, { tool }, now));
      return 'closed';
    }
    const failures = row.failures + 1;
    const open = row.state !== 'closed' || failures >= policy.threshold;
    // A late failure of a call let through before the breaker opened keeps its cooldown.
    const openedAt = row.state === 'open' ? row.opened_at : open ? now : null;
    await put(q, { tool, state: open ? 'open' : 'closed', failures, opened_at: openedAt, probe_until: null }, now);
    if (open && row.state !== 'open') events.push(await appendEvent(q, taskId, 'breaker.opened', BREAKER, { tool, failures }, now));
    return open ? 'open' : row.state;
  },

  async list(q: Query): Promise<BreakerRow[]> {
    // COLLATE "C": byte order, as SQLite sorts text, whatever the database's collation.
    const rows = await q<Row & Record<string, unknown>>('SELECT tool, state, failures, opened_at FROM tool_breakers ORDER BY tool COLLATE "C"');
    return rows.map((r) => ({ tool: r.tool, state: r.state, failures: r.failures, openedAt: r.opened_at }));
  },
};
