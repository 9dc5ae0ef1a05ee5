/**
 * The circuit breaker's rules, one place for both adapters: what an acquire or a record does
 * with the breaker as stored. The adapters read (and lock) the row, and write what this says.
 */
import type { BreakerPolicy, BreakerState, BreakerVerdict } from './run-store.js';

export interface BreakerRow {
  tool: string;
  state: BreakerState;
  failures: number;
  opened_at: number | null;
  probe_until: number | null;
}

export interface BreakerStep<T> {
  result: T;
  /** The row to store, when it changes. */
  write?: BreakerRow;
  /** The event to append (breaker.half_opened / closed / opened), when the state moved. */
  event?: { type: string; data: Record<string, unknown> };
}

/** A call asks to pass: closed passes; open passes once as the half-open probe after its cooldown, or when the probe was lost. */
export function acquireBreaker(row: BreakerRow | undefined, policy: BreakerPolicy, now: number): BreakerStep<BreakerVerdict> {
  if (row === undefined || row.state === 'closed') return { result: { allowed: true, state: 'closed', probe: false } };
  const cooled = row.state === 'open' && now >= (row.opened_at ?? 0) + policy.cooldownMs;
  const probeLost = row.state === 'half_open' && now > (row.probe_until ?? 0);
  if (!cooled && !probeLost) return { result: { allowed: false, state: row.state, probe: false } };
  return {
    result: { allowed: true, state: 'half_open', probe: true },
    write: { ...row, state: 'half_open', probe_until: now + policy.probeTimeoutMs },
    event: { type: 'breaker.half_opened', data: { tool: row.tool } },
  };
}

/** A call's outcome: a success closes the breaker; failures count, and open it at the threshold (or at once when it was not closed). */
export function recordBreaker(stored: BreakerRow | undefined, tool: string, ok: boolean, policy: BreakerPolicy, now: number): BreakerStep<BreakerState> {
  const row = stored ?? { tool, state: 'closed' as BreakerState, failures: 0, opened_at: null, probe_until: null };
  if (ok) {
    if (row.state === 'closed' && row.failures === 0) return { result: 'closed' };
    return {
      result: 'closed',
      write: { tool, state: 'closed', failures: 0, opened_at: null, probe_until: null },
      ...(row.state !== 'closed' ? { event: { type: 'breaker.closed', data: { tool } } } : {}),
    };
  }
  const failures = row.failures + 1;
  const open = row.state !== 'closed' || failures >= policy.threshold;
  // A late failure of a call let through before the breaker opened keeps its cooldown.
  const openedAt = row.state === 'open' ? row.opened_at : open ? now : null;
  return {
    result: open ? 'open' : row.state,
    write: { tool, state: open ? 'open' : 'closed', failures, opened_at: openedAt, probe_until: null },
    ...(open && row.state !== 'open' ? { event: { type: 'breaker.opened', data: { tool, failures } } } : {}),
  };
}
