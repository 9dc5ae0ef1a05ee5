/**
 * No-progress detectors (seed 004). A max step count is the last resort; these catch a
 * run going nowhere much earlier:
 * - repeat: the same tool with the same canonical arguments against the same state
 *   version (count of successful writes) `repeatLimit` times;
 * - oscillation: the last four actions alternate A-B-A-B with no successful write between;
 * - no_progress: `idleRounds` rounds in a row without a successful call that produced
 *   something new (a rejected, failed or repeated call is no progress).
 */
import { createHash } from 'node:crypto';

export type Detector = 'repeat' | 'oscillation' | 'no_progress';

/** JSON with object keys sorted, so equal arguments have one spelling. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value as object)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

const digest = (text: string) => createHash('sha1').update(text).digest('base64url').slice(0, 16);
/** A value's short spelling for the detectors' keys: itself when short, else a digest (marked apart, so the two never meet). */
const keyOf = (value: unknown): string => {
  const text = canonical(value);
  return text.length <= 32 ? `=${text}` : `#${digest(text)}`;
};

export interface ActionRecord {
  tool: string;
  args: unknown;
  /** Did the call run and succeed? */
  ok: boolean;
  write: boolean;
  result: unknown;
}

export interface DetectorState {
  repeatLimit: number;
  idleRounds: number;
  stateVersion: number;
  counts: Map<string, number>;
  recent: string[];
  seenResults: Set<string>;
  idle: number;
}

export function createDetectors(repeatLimit: number, idleRounds: number): DetectorState {
  return { repeatLimit, idleRounds, stateVersion: 0, counts: new Map(), recent: [], seenResults: new Set(), idle: 0 };
}

/** Records one round's action (or a round without one) and names a detector that fired. */
export function observeRound(state: DetectorState, action: ActionRecord | null): Detector | null {
  if (action === null) {
    state.idle++;
    return state.idle >= state.idleRounds ? 'no_progress' : null;
  }
  const signature = `${action.tool}:${keyOf(action.args)}`;
  const key = `${signature}@${state.stateVersion}`;
  const seen = (state.counts.get(key) ?? 0) + 1;
  state.counts.set(key, seen);
  // Alternation only counts while no write lands: A and B at a new state version are new moves.
  state.recent.push(key);
  if (state.recent.length > 4) state.recent.shift();

  const outcome = action.ok ? `${signature}->${keyOf(action.result)}` : undefined;
  const fresh = outcome !== undefined && !state.seenResults.has(outcome);
  if (outcome !== undefined) state.seenResults.add(outcome);
  if (action.ok && action.write) state.stateVersion++;
  state.idle = fresh ? 0 : state.idle + 1;

  if (seen >= state.repeatLimit) return 'repeat';
  const [a, b, c, d] = state.recent;
  if (state.recent.length === 4 && a === c && b === d && a !== b) return 'oscillation';
  if (state.idle >= state.idleRounds) return 'no_progress';
  return null;
}
