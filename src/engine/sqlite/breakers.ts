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

  /** Writes what a rule of breaker-rules.ts decided. */
  const apply = (step: BreakerStep<unknown>, taskId: number | null, now: number, events: TaskEvent[]): void => {
    if (step.write !== undefined) put.run({ ...step.write, now });
    if (step.event !== undefined) events.push(writer.append(taskId, step.event.type, BREAKER, step.event.data, now));
  };

  return {
    clean(tool) {
      const row = get.get(tool);
      return row === undefined || (row.state === 'closed' && row.failures === 0);
    },
    acquire(tool, policy, now, events) {
      const step = acquireBreaker(get.get(tool), policy, now);
      apply(step, null, now, events);
      return step.result;
    },
    record(tool, ok, policy, taskId, now, events) {
      const step = recordBreaker(get.get(tool), tool, ok, policy, now);
      apply(step, taskId, now, events);
      return step.result;
    },
    list: () => all.all().map((r) => ({ tool: r.tool, state: r.state, failures: r.failures, openedAt: r.opened_at })),
  };
}
