import { describe, expect, it } from 'vitest';
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
});
