/**
 * Key combinations as an agent writes them (`ctrl+s`, `ctrl+shift+t`, `enter`, `f5`),
 * checked here, before anything runs, and mapped to the names of nut.js's `Key` enum,
 * which the desktop host looks up. Names are case-insensitive; `+` joins keys pressed
 * together. A US layout is assumed, as nut.js assumes it.
 */

/**
 * Named keys. A Map, not a plain object: a key name is untrusted, and an object lookup
 * would find `constructor` or `__proto__` on Object.prototype.
 */
const NAMED: ReadonlyMap<string, string> = new Map(Object.entries({
  ctrl: 'LeftControl',
  control: 'LeftControl',
  shift: 'LeftShift',
  alt: 'LeftAlt',
  super: 'LeftSuper',
  meta: 'LeftSuper',
  win: 'LeftSuper',
  cmd: 'LeftSuper',
  enter: 'Enter',
  return: 'Enter',
  tab: 'Tab',
  esc: 'Escape',
  escape: 'Escape',
  backspace: 'Backspace',
  delete: 'Delete',
  del: 'Delete',
  insert: 'Insert',
  home: 'Home',
  end: 'End',
  pageup: 'PageUp',
  pagedown: 'PageDown',
  up: 'Up',
  down: 'Down',
  left: 'Left',
  right: 'Right',
  space: 'Space',
  minus: 'Minus',
  equal: 'Equal',
  comma: 'Comma',
  period: 'Period',
  slash: 'Slash',
  backslash: 'Backslash',
  semicolon: 'Semicolon',
  quote: 'Quote',
  grave: 'Grave',
  leftbracket: 'LeftBracket',
  rightbracket: 'RightBracket',
  menu: 'Menu',
  print: 'Print',
}));

const MAX_KEYS = 5;
const MODIFIERS = new Set(['LeftControl', 'LeftShift', 'LeftAlt', 'LeftSuper']);

/** One key name → its nut.js `Key` name, or null when unknown. */
export function keyName(name: string): string | null {
  const key = name.trim().toLowerCase();
  if (/^[a-z]$/.test(key)) return key.toUpperCase();
  if (/^[0-9]$/.test(key)) return `Num${key}`;
  if (/^f([1-9]|1[0-2])$/.test(key)) return key.toUpperCase();
  return NAMED.get(key) ?? null;
}

/**
 * A nut.js `Key` name → its code in nut.js's `Key` enum, or null. Own numeric entries only:
 * the enum is a plain object (`constructor` is inherited) with reverse entries (`Key[0]` is
 * a name, not a code).
 */
export function nutKeyCode(keyEnum: Readonly<Record<string, unknown>>, name: string): number | null {
  if (!Object.hasOwn(keyEnum, name)) return null;
  const code = keyEnum[name];
  return typeof code === 'number' ? code : null;
}

/** `ctrl+s` → ['LeftControl', 'S']; a problem in words when the combination is not valid. */
export function parseCombo(combo: string): { ok: true; keys: string[] } | { ok: false; problem: string } {
  const parts = combo.split('+');
  if (parts.length > MAX_KEYS) return { ok: false, problem: `at most ${MAX_KEYS} keys at once` };
  const keys: string[] = [];
  for (const part of parts) {
    if (part.trim() === '') return { ok: false, problem: `an empty key in "${combo}" (write e.g. ctrl+s)` };
    const key = keyName(part);
    if (key === null) return { ok: false, problem: `unknown key "${part.trim()}" (letters, digits, f1-f12, ctrl, shift, alt, super, enter, tab, esc, arrows, …)` };
    if (keys.includes(key)) return { ok: false, problem: `"${part.trim()}" is given twice` };
    keys.push(key);
  }
  // nut.js presses the last key with the others held as modifiers (and drops a non-modifier there).
  const held = keys.slice(0, -1).find((k) => !MODIFIERS.has(k));
  if (held !== undefined) return { ok: false, problem: `only the last key of "${combo}" may be other than ctrl, shift, alt or super` };
  return { ok: true, keys };
}
