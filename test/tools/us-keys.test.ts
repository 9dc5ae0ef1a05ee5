import { describe, expect, it } from 'vitest';
import { keyName, nutKeyCode, parseCombo } from '../../src/tools/desktop/keys.js';
import { nutKeysFor, nutStrokes } from '../../src/tools/desktop/us-keys.js';

describe('text to key presses on a US layout', () => {
  it('maps every printable ASCII character, Enter and Tab to keys, with shift where the layout needs it', () => {
    expect(nutKeysFor('a')).toEqual(['A']);
    expect(nutKeysFor('A')).toEqual(['LeftShift', 'A']);
    expect(nutKeysFor('7')).toEqual(['Num7']);
    expect(nutKeysFor('&')).toEqual(['LeftShift', 'Num7']);
    expect(nutKeysFor('-')).toEqual(['Minus']);
    expect(nutKeysFor('_')).toEqual(['LeftShift', 'Minus']);
    expect(nutKeysFor('"')).toEqual(['LeftShift', 'Quote']);
    expect(nutKeysFor('\n')).toEqual(['Enter']);
    for (let c = 32; c < 127; c++) expect(nutKeysFor(String.fromCharCode(c)), String.fromCharCode(c)).not.toBeNull();
  });

  it('leaves text with any other character to xdotool', () => {
    expect(nutStrokes('Hi!')).toEqual([['LeftShift', 'H'], ['I'], ['LeftShift', 'Num1']]);
    expect(nutStrokes('café')).toBeNull();
    expect(nutStrokes('你好')).toBeNull();
    expect(nutStrokes('\u0007')).toBeNull();
  });

  it('reads key combinations: modifiers first, one other key last', () => {
    expect(parseCombo('ctrl+s')).toEqual({ ok: true, keys: ['LeftControl', 'S'] });
    expect(parseCombo('Ctrl+Shift+T')).toEqual({ ok: true, keys: ['LeftControl', 'LeftShift', 'T'] });
    expect(parseCombo('enter')).toEqual({ ok: true, keys: ['Enter'] });
    expect(parseCombo('alt+f4')).toEqual({ ok: true, keys: ['LeftAlt', 'F4'] });
    expect(parseCombo('a+b')).toEqual({ ok: false, problem: 'only the last key of "a+b" may be other than ctrl, shift, alt or super' });
    expect(parseCombo('ctrl+ctrl')).toMatchObject({ ok: false, problem: '"ctrl" is given twice' });
    expect(parseCombo('ctrl+nope')).toMatchObject({ ok: false });
  });

  it('refuses key names that only exist on Object.prototype, like any unknown key', () => {
    for (const name of ['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf', 'isPrototypeOf']) {
      expect(keyName(name), name).toBeNull();
      expect(parseCombo(name), name).toEqual({ ok: false, problem: expect.stringContaining(`unknown key "${name}"`) });
      expect(parseCombo(`ctrl+${name}`), name).toMatchObject({ ok: false, problem: expect.stringContaining('unknown key') });
    }
    expect(nutKeysFor('__proto__')).toBeNull();
  });

  it("looks up a nut.js key code among the enum's own numeric entries only", () => {
    // The shape of a TypeScript numeric enum such as nut.js's Key: names to codes and codes back to names.
    const Key = { Escape: 0, 0: 'Escape', A: 1, 1: 'A' } as Record<string, unknown>;
    expect(nutKeyCode(Key, 'A')).toBe(1);
    expect(nutKeyCode(Key, 'Escape')).toBe(0);
    expect(nutKeyCode(Key, '0')).toBeNull();
    expect(nutKeyCode(Key, 'constructor')).toBeNull();
    expect(nutKeyCode(Key, '__proto__')).toBeNull();
    expect(nutKeyCode(Key, 'Nope')).toBeNull();
  });
});
