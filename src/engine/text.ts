/**
 * Bounded, linear-time handling of untrusted text (a goal, a tool's output, a planner's
 * reason). Every function here does work proportional to its input, and `clip` bounds the
 * input of whatever runs after it: clip first, then reshape. No regex here has nested or
 * adjacent quantifiers, which backtrack quadratically on a long run of whitespace (the old
 * pattern `\s*\n\s*` took ~5 s on a 60 KB goal of spaces).
 */

/** A UTF-16 unit that is half of a pair without its other half: not text (no encoding holds it). */
export const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Line terminators as JavaScript counts them. */
const LINE_BREAK = /[\n\r\u2028\u2029]/;

/**
 * At most `max` UTF-16 units of `text`, then an ellipsis and the original length (`total`,
 * when `text` is already a part of the original) when it was cut (so the reader knows there
 * was more). Never splits a surrogate pair.
 */
export function clip(text: string, max: number, total = text.length): string {
  if (text.length <= max && total <= text.length) return text;
  return `${head(text, max)}… (${total} chars, cut)`;
}

/** At most `max` UTF-16 units of `text` from its start, never half a surrogate pair. */
export function head(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * The text on one line: each run of whitespace that holds a line break becomes one space;
 * other whitespace is kept as it is. Linear: `\s+` consumes each run once.
 */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, (run) => (LINE_BREAK.test(run) ? ' ' : run));
}

/**
 * Characters that must not reach an operator's terminal as they are: C0 and C1 controls (a
 * line break forges a line, an escape sequence moves the cursor or repaints), the line and
 * paragraph separators, the bidirectional overrides, isolates and marks (which reorder what
 * is shown), the invisible zero-width space and byte-order mark (which hide where one word
 * ends), and lone surrogates. The zero-width joiners (U+200C, U+200D) stay: scripts and emoji
 * need them to render, and they reorder nothing.
 */
const UNPRINTABLE = new RegExp(String.raw`[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]|${LONE_SURROGATE.source}`, 'g');
const SHORT: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text someone else wrote (an agent's reason, a title, a tool's error), safe to print on one
 * line of a terminal: each character above shown as its escape (`\n`, `\u001b`). Linear.
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => SHORT[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
