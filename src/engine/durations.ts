/** Durations (`500ms`, `30s`, `5m`, `2h`, `1d`, combined as `1h30m`) and times (ISO 8601 or `+DURATION`). */
import { EngineError } from './errors.js';

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;

/**
 * The longest duration anything takes: 100 years. A card's deadline or approval expiry is
 * added to a time, and past Date's range (year 275760) every surface that printed it threw
 * RangeError; one such card at the head of the queue failed every claim of every daemon.
 */
export const MAX_DURATION_MS = 100 * 365 * 86_400_000;

/** Parses a duration into ms, or throws VALIDATION_FAILED naming `what`. */
export function parseDuration(text: string, what = 'duration'): number {
  const ms = parseAnyDuration(text, what);
  if (!(ms <= MAX_DURATION_MS)) throw new EngineError('VALIDATION_FAILED', `${what}: '${text.length > 40 ? `${text.slice(0, 40)}…` : text}' is longer than 100 years`);
  return ms;
}

function parseAnyDuration(text: string, what: string): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  let total = 0;
  let consumed = 0;
  for (const match of trimmed.matchAll(PART)) {
    if (match.index !== consumed) break;
    total += Number(match[1]) * UNIT_MS[match[2]!]!;
    consumed += match[0].length;
  }
  if (consumed === 0 || consumed !== trimmed.length) {
    throw new EngineError('VALIDATION_FAILED', `${what}: '${text}' is not a duration (use e.g. 500ms, 30s, 5m, 2h, 1d)`);
  }
  return Math.round(total);
}

/** Parses `+DURATION` relative to `now`, or an ISO 8601 date-time, into epoch ms. */
export function parseTime(text: string, now: number, what = 'time'): number {
  const trimmed = text.trim();
  if (trimmed.startsWith('+')) return now + parseDuration(trimmed.slice(1), what);
  if (/^\d{4}-\d{2}-\d{2}/.test(trimmed)) {
    const at = Date.parse(trimmed);
    if (!Number.isNaN(at)) return at;
  }
  throw new EngineError('VALIDATION_FAILED', `${what}: '${text}' is neither an ISO 8601 time nor +DURATION`);
}
