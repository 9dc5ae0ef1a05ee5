/**
 * Text to key presses on a US layout, for `type_text`. nut.js's own `type(string)` drops
 * the shift of symbols under X (`!` comes out as `1`) and cannot type a character that has
 * no key (é, 你). So printable ASCII, Enter and Tab are pressed key by key through nut.js,
 * with shift where the US layout needs it; text with any other character goes to xdotool.
 */

/** The key of each unshifted character, by nut.js `Key` name (Maps: a character is untrusted input). */
const BASE: ReadonlyMap<string, string> = new Map(Object.entries({
  '`': 'Grave', '-': 'Minus', '=': 'Equal', '[': 'LeftBracket', ']': 'RightBracket', '\\': 'Backslash',
  ';': 'Semicolon', "'": 'Quote', ',': 'Comma', '.': 'Period', '/': 'Slash', ' ': 'Space', '\n': 'Enter', '\t': 'Tab',
}));
/** Shifted characters and the key they share. */
const SHIFTED: ReadonlyMap<string, string> = new Map(Object.entries({
  '~': 'Grave', '!': 'Num1', '@': 'Num2', '#': 'Num3', $: 'Num4', '%': 'Num5', '^': 'Num6', '&': 'Num7', '*': 'Num8',
  '(': 'Num9', ')': 'Num0', _: 'Minus', '+': 'Equal', '{': 'LeftBracket', '}': 'RightBracket', '|': 'Backslash',
  ':': 'Semicolon', '"': 'Quote', '<': 'Comma', '>': 'Period', '?': 'Slash',
}));

/** The nut.js `Key` names that type one character (modifier first), or null when no key does. */
export function nutKeysFor(ch: string): string[] | null {
  if (/^[a-z]$/.test(ch)) return [ch.toUpperCase()];
  if (/^[A-Z]$/.test(ch)) return ['LeftShift', ch];
  if (/^[0-9]$/.test(ch)) return [`Num${ch}`];
  const base = BASE.get(ch);
  if (base !== undefined) return [base];
  const shifted = SHIFTED.get(ch);
  if (shifted !== undefined) return ['LeftShift', shifted];
  return null;
}

/** The key presses of `text`, or null when some character needs xdotool. */
export function nutStrokes(text: string): string[][] | null {
  const strokes: string[][] = [];
  for (const ch of text) {
    const keys = nutKeysFor(ch);
    if (keys === null) return null;
    strokes.push(keys);
  }
  return strokes;
}
