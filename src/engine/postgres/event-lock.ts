/**
 * The advisory lock every transaction that takes an event id holds (shared: writers never
 * wait for each other) until it ends; the tail's horizon (reads.ts) looks for its holders.
 * The first key is taskloop's, the second the schema's (eventLockKey).
 */
export const EVENT_LOCK_CLASS = 0x74_6c_65_76; // 'tlev'

/** The schema's key of the event lock: a 31-bit FNV-1a hash of its name (an oid in pg_locks). */
export function eventLockKey(schema: string): number {
  let h = 0x811c9dc5;
  for (const ch of schema) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return h & 0x7fffffff;
}
