import { describe, expect, it } from 'vitest';
import { parseCombo } from '../../src/tools/desktop/keys.js';
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
});
