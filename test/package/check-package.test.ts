// CI's package check (scripts/check-package.mjs): the packed tarball installed into a fresh
// project, examples/ typechecked with skipLibCheck: false and run, under zod 3.25 and zod 4.
// It needs the registry (npm install) and takes a minute or two; `npm test` builds dist/ first.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers.js';

describe('the packed package', () => {
  it('installs into a fresh project, and its examples typecheck and run under zod 3.25 and zod 4', async () => {
    const child = spawn(process.execPath, [join(ROOT, 'scripts/check-package.mjs')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(out, out).toMatch(/zod 3\.25\.\d+: tsc clean \(skipLibCheck: false\); ran store, worker, mcp, daemon/);
    expect(out, out).toMatch(/zod 4\.\d+\.\d+: tsc clean \(skipLibCheck: false\); ran store, worker, mcp, daemon/);
    expect(code, out).toBe(0);
  }, 900_000);
});
