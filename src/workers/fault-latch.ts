/**
 * The fault that stops a daemon, told once. A fault a thread relays from another ("another
 * thread of this process found the database corrupt", `data.relayed`) names no cause of its
 * own: the thread that met the fault first hand reports it moments later, and that account
 * replaces the relayed one. Which of the two reaches the main thread first is a race (the
 * heartbeat may write between a worker thread's trip and its note), so the stopping line of a
 * relayed fault waits for `tell` (the caller's stop, after its grace) unless the first-hand
 * account comes before.
 */
import type { EngineError } from '../engine/index.js';

export interface FaultLatch {
  /** The fault that stops the daemon: a first-hand one if any came. */
  readonly fault: EngineError | undefined;
  /** Takes a fault; true for the first of all (the caller starts its stop). */
  offer(err: EngineError): boolean;
  /** Logs the stopping line now if it has not been logged. */
  tell(): void;
}

/** Whether `err` is a fault relayed from another thread of this process. */
export const isRelayed = (err: EngineError): boolean => err.data?.relayed === true;

export function createFaultLatch(log: (line: string) => void, describe: (err: EngineError) => string): FaultLatch {
  let fault: EngineError | undefined;
  let told = false;
  const tell = (): void => {
    if (told || fault === undefined) return;
    told = true;
    log(`stopping: ${describe(fault)}`);
  };
  return {
    get fault() {
      return fault;
    },
    offer(err) {
      const first = fault === undefined;
      if (first || (!told && isRelayed(fault!) && !isRelayed(err))) fault = err;
      if (!isRelayed(fault!)) tell();
      return first;
    },
    tell,
  };
}
