/**
 * The in-process EventBus: a typed map of dotted event names on mitt. Emitting never
 * throws: every listener is wrapped at registration, so one that fails is reported through
 * `onListenerError` and the others still run. Across processes, `task_events` is the truth
 * (see tail.ts); this bus carries the same events to listeners in one process.
 */
import mittImport from 'mitt';
import type { Emitter, Handler } from 'mitt';
import type { TaskEvent } from './types.js';

/** Known event names (DESIGN §4). Payloads are always the stored event object. */
export const EVENT_TYPES = [
  'task.created',
  'task.claimed',
  'task.transitioned',
  'task.cancelled',
  'task.stale_reclaimed',
  'run.started',
  'run.step_started',
  'run.step_finished',
  'run.paused',
  'run.resumed',
  'run.finished',
  'approval.requested',
  'approval.decided',
  'breaker.opened',
  'breaker.closed',
] as const;
export type EventName = (typeof EVENT_TYPES)[number];

export type EngineEvents = { [K in EventName]: TaskEvent } & { [key: string]: TaskEvent };

// mitt ships CommonJS-style typings; under NodeNext its default export needs this cast.
const mitt = mittImport as unknown as <E extends Record<string, unknown>>() => Emitter<E>;

export interface EventBus {
  on(type: string | '*', listener: (event: TaskEvent) => void): () => void;
  emit(event: TaskEvent): void;
  emitAll(events: readonly TaskEvent[]): void;
}

export interface EventBusOptions {
  /** Called when a listener throws; the error never reaches the emitter. @defaultValue logs to stderr */
  onListenerError?: (err: unknown, event: TaskEvent) => void;
}

export function createEventBus(opts: EventBusOptions = {}): EventBus {
  const emitter = mitt<EngineEvents>();
  const report =
    opts.onListenerError ??
    ((err: unknown, event: TaskEvent) => {
      process.stderr.write(`taskloop: a listener of ${event.type} failed: ${err instanceof Error ? err.message : String(err)}\n`);
    });
  const safe = (listener: (event: TaskEvent) => void) => (event: TaskEvent) => {
    try {
      listener(event);
    } catch (err) {
      try {
        report(err, event);
      } catch {
        // The reporter itself failed; there is nowhere left to report to.
      }
    }
  };

  return {
    on(type, listener) {
      if (type === '*') {
        const wrapped = safe(listener);
        const wildcard = (_type: string | number, event: TaskEvent) => wrapped(event);
        emitter.on('*', wildcard);
        return () => emitter.off('*', wildcard);
      }
      const wrapped: Handler<TaskEvent> = safe(listener);
      emitter.on(type, wrapped);
      return () => emitter.off(type, wrapped);
    },
    emit(event) {
      emitter.emit(event.type, event);
    },
    emitAll(events) {
      for (const event of events) emitter.emit(event.type, event);
    },
  };
}
