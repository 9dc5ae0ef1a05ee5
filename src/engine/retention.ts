/**
 * Retention's rules on every store (DESIGN §3): how many tasks one pass compacts, and the
 * `retention.compacted` event each pass that deletes anything writes first.
 */
import { systemActor } from './actors.js';

/** Tasks compacted per pass: one transaction stays short; the caller calls again. */
export const RETENTION_BATCH = 500;

export const RETENTION = systemActor('retention');

export const compactedData = (tasks: number, before: number): Record<string, unknown> => ({
  tasks,
  finished_before: new Date(before).toISOString(),
});
