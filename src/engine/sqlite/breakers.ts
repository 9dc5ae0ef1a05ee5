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
import { type BreakerStep, acquireBreaker, recordBreaker } from '../breaker-rules.js';

const BREAKER = systemActor('breaker');

/**
 * How long a read that found a breaker clean (closed, no failures) stands for this
 * connection's later calls of the tool, in ms. A daemon thread's runs move in step (a group
 * commit at a time), so the calls it starts together read the row once between them instead
 * of once each — a read outside a transaction takes a snapshot of the file, ~4% of a
 * thread's CPU in a drain of one-tool tasks. A breaker another process opens is honoured by
 * every call that starts this long after it: less than a call itself runs, during which a
 * call let through just before the opening goes on anyway. Only "clean" is kept, and a
 * breaker write on this connection drops its tool's entry at once.
 */
export const CLEAN_FOR_MS = 2;

interface Row {
  tool: string;
  state: BreakerState;
  failures: number;
  opened_at: number | null;
  probe_until: number | null;
}

export interface Breakers {
  /** Read without a transaction (or kept for CLEAN_FOR_MS): true when the breaker is closed with no failures (nothing to write). */
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

  // Tool → when it was last read clean (performance.now(): a store's clock may stand still).
  const cleanAt = new Map<string, number>();

  /** Writes what a rule of breaker-rules.ts decided. */
  const apply = (step: BreakerStep<unknown>, taskId: number | null, now: number, events: TaskEvent[]): void => {
    if (step.write !== undefined) put.run({ ...step.write, now });
    if (step.event !== undefined) events.push(writer.append(taskId, step.event.type, BREAKER, step.event.data, now));
  };

  return {
    clean(tool) {
      const at = performance.now();
      const seen = cleanAt.get(tool);
      if (seen !== undefined && at - seen < CLEAN_FOR_MS) return true;
      const row = get.get(tool);
      const clean = row === undefined || (row.state === 'closed' && row.failures === 0);
      if (!clean) cleanAt.delete(tool);
      else {
        if (cleanAt.size >= 1024) cleanAt.clear(); // tools are few; never let a caller grow it
        cleanAt.set(tool, at);
      }
      return clean;
    },
    acquire(tool, policy, now, events) {
      cleanAt.delete(tool);
      const step = acquireBreaker(get.get(tool), policy, now);
      apply(step, null, now, events);
      return step.result;
    },
    record(tool, ok, policy, taskId, now, events) {
      cleanAt.delete(tool);
      const step = recordBreaker(get.get(tool), tool, ok, policy, now);
      apply(step, taskId, now, events);
      return step.result;
    },
    list: () => all.all().map((r) => ({ tool: r.tool, state: r.state, failures: r.failures, openedAt: r.opened_at })),
  };
}
