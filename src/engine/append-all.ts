/**
 * `into.push(...items)` for arrays of any length. A spread passes every item as an argument,
 * and past ~120,000 V8 throws a RangeError (no code) — the number of events a cascade of
 * cancels or a sweep writes is up to whoever hung the tasks, so their lists are appended so.
 */
export function appendAll<T>(into: T[], items: readonly T[]): void {
  for (const item of items) into.push(item);
}
