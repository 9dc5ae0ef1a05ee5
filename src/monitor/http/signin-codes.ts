/**
 * One-time sign-in codes: how a server hands the person who started it a signed-in board
 * without putting the long-lived token in a URL. The server prints
 * `http://127.0.0.1:7070/?signin=<code>`; the board page trades the code for a session
 * cookie (POST /api/session `{"code"}`, session.ts) and drops it from the address bar.
 *
 * A code is 192 random bits, good for one sign-in, within SIGNIN_CODE_MS of being issued,
 * and lives only in this process's memory. A code that was used, has expired, or was never
 * issued is refused alike, so a refusal says nothing about which.
 */
import { randomBytes } from 'node:crypto';
import type { Actor } from '../../engine/index.js';

/** How long a sign-in code may wait to be used. */
export const SIGNIN_CODE_MS = 5 * 60 * 1000;
/** The oldest unused code gives way past this many. */
const MAX_CODES = 100;

export interface SignInCodes {
  /** A new code that signs in as `actor` once. */
  issue(actor: Actor): string;
  /** The actor of a live code, which is used up by this call; undefined otherwise. */
  redeem(code: string): Actor | undefined;
}

export function createSignInCodes(now: () => number = Date.now): SignInCodes {
  const live = new Map<string, { actor: Actor; expiresAt: number }>();
  return {
    issue(actor) {
      const code = randomBytes(24).toString('base64url');
      live.set(code, { actor, expiresAt: now() + SIGNIN_CODE_MS });
      // A Map iterates in insertion order: the first key is the oldest code.
      if (live.size > MAX_CODES) live.delete(live.keys().next().value!);
      return code;
    },
    redeem(code) {
      const entry = live.get(code);
      live.delete(code);
      if (entry === undefined || entry.expiresAt <= now()) return undefined;
      return entry.actor;
    },
  };
}
