import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, EngineError, isEngineError } from '../../src/engine/index.js';
import { ROOT } from '../helpers.js';
import { HTTP_ERROR_CODES } from '../../src/monitor/http/errors.js';

describe('error codes', () => {
  it('the README documents exactly the codes of the registry (and of the HTTP surface), with the same meaning', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Error codes'), readme.indexOf('The HTTP surface adds'));
    const rows = [...section.matchAll(/^\| `([A-Z_]+)` \| (.+) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(rows)).toEqual(ERROR_CODES);
    const http = readme.slice(readme.indexOf('The HTTP surface adds'));
    const httpRows = [...http.matchAll(/^\| `([A-Z_]+)` \| \d{3} \| (.+) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(Object.keys(Object.fromEntries(httpRows))).toEqual(Object.keys(HTTP_ERROR_CODES));
  });

  it('an error survives a trip across a thread as {code, message, data}', () => {
    const original = new EngineError('STALE_CLAIM', 'task 1: stale', { task_id: 1 });
    const copy = structuredClone(original.toJSON());
    expect(isEngineError(copy)).toBe(true);
    const rebuilt = EngineError.from(copy);
    expect(rebuilt).toBeInstanceOf(EngineError);
    expect(rebuilt.toJSON()).toEqual({ code: 'STALE_CLAIM', message: 'task 1: stale', data: { task_id: 1 } });
    expect(isEngineError({ code: 'NOT_A_CODE', message: 'x' })).toBe(false);
  });
});
