/**
 * Tool circuit breakers shared by every worker and process: closed → open after
 * `threshold` consecutive failures → half-open after the cooldown, when exactly one caller
 * is granted a probe; the probe's result closes or re-opens the breaker.
 */
import type { BreakerPolicy, BreakerRow, BreakerState, BreakerVerdict } from '../run-store.js';
import { systemActor } from '../actors.js';
import type { TaskEvent } from '../types.js';
import type { Db } from './connection.js';
import type { EventWriter } from './rows.js';

const BREAKER = systemActor('breaker');

interface Row {
  tool: string;
  state: BreakerState;
  failures: number;
  opened_at: number | null;
  probe_until: number | null;
}

export interface Breakers {
  /** Read without a transaction: true when the breaker is closed with no failures (nothing to write). */
  clean(tool: string): boolean;
  acquire(tool: string, policy: BreakerPolicy, now: number, events: TaskEvent[]): BreakerVerdict;
  record(tool: string, ok: boolean, policy: BreakerPolicy, taskId: number | null, now: number, events: TaskEvent[]): BreakerState;
  list(): BreakerRow[];
}

export function prepareBreakers(db: Db, writer: EventWriter): Breakers {
  const get = db.prepare<[string], Row>('SELECT * FROM tool_breakers WHERE tool = ?');
  const all = db.prepare<[], Row>('SELECT * FROM tool_breakers ORDER BY tool');
  const put = db.prepare(
    `INSERT INTO tool_breakers (tool, state, failures, opened_at, probe_until, updated_at) VALUES (@tool, @state, @failures, @opened_at, @probe_until, @now)
     ON CONFLICT (tool) DO UPDATE SET state = excluded.state, failures = excluded.failures, opened_at = excluded.opened_at,
       probe_until = excluded.probe_until, updated_at = excluded.updated_at`,
  );

  return {
    clean(tool) {
      const row = get.get(tool);
      return row === undefined || (row.state === 'closed' && row.failures === 0);
    },
    acquire(tool, policy, now, events) {
      const row = get.get(tool);
      if (row === undefined || row.state === 'closed') return { allowed: true, state: 'closed', probe: false };
      const cooled = row.state === 'open' && now >= (row.opened_at ?? 0) + policy.cooldownMs;
      const probeLost = row.state === 'half_open' && now > (row.probe_until ?? 0);
      if (!cooled && !probeLost) return { allowed: false, state: row.state, probe: false };
      put.run({ tool, state: 'half_open', failures: row.failures, opened_at: row.opened_at, probe_until: now + policy.probeTimeoutMs, now });
      events.push(writer.append(null, 'breaker.half_opened', BREAKER, { tool }, now));
      return { allowed: true, state: 'half_open', probe: true };
    },
    record(tool, ok, policy, taskId, now, events) {
      const row = get.get(tool) ?? { tool, state: 'closed' as BreakerState, failures: 0, opened_at: null, probe_until: null };
      if (ok) {
        if (row.state === 'closed' && row.failures === 0) return 'closed';
        put.run({ tool, state: 'closed', failures: 0, opened_at: null, probe_until: null, now });
        if (row.state !== 'closed') events.push(writer.append(taskId, 'breaker.closed', BREAKER, { tool }, now));
        return 'closed';
      }
      const failures = row.failures + 1;
      const open = row.state !== 'closed' || failures >= policy.threshold;
      // A late failure of a call let through before the breaker opened keeps its cooldown.
      const openedAt = row.state === 'open' ? row.opened_at : open ? now : null;
      put.run({ tool, state: open ? 'open' : 'closed', failures, opened_at: openedAt, probe_until: null, now });
      if (open && row.state !== 'open') events.push(writer.append(taskId, 'breaker.opened', BREAKER, { tool, failures }, now));
      return open ? 'open' : row.state;
    },
    list: () => all.all().map((r) => ({ tool: r.tool, state: r.state, failures: r.failures, openedAt: r.opened_at })),
  };
}
