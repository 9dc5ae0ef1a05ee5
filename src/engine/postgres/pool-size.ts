/** Sizing a store's connection pool (no driver import: the engine's index exports it). */

/**
 * The pool size when the URL does not set one: each run in flight holds a connection only
 * while it writes (a transaction lasts a few round trips), so a quarter of a thread's runs
 * in flight, at least 2 and at most 10. A daemon with 2 threads and `--concurrency 64` opens
 * 2 × 8 connections for its threads, plus 2 for its claimer and one LISTEN connection per
 * store: about 20 per daemon process. Size `max_connections` for your daemons from this.
 */
export function poolSizeFor(runsInFlight = 8): number {
  return Math.max(2, Math.min(10, Math.ceil(runsInFlight / 4)));
}
