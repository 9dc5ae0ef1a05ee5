import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../helpers.js';
import { spawnCli } from './helpers.js';

describe('taskloop demo', () => {
  it('runs the three ticket paths and the dependency graph to their ends, approving by itself without a terminal, and exits 0', async () => {
    const db = join(tempDir(), 'demo.db');
    const env = { OPENAI_API_KEY: '', TASKLOOP_TOKEN: '', TASKLOOP_TOKENS: '' };
    const r = await spawnCli(['--db', db, '--json', 'demo', '--port', '0'], { env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('planner: scripted (set OPENAI_API_KEY to use an LLM)');
    expect(r.stderr).toContain('approving notify_oncall');
    // The board is printed signed in: a one-time link, never the token, which stays in an owner-only file.
    expect(r.stderr).toMatch(/board: http:\/\/127\.0\.0\.1:\d+\/\?signin=[\w-]{32} /);
    const token = readFileSync(`${db}.http-token`, 'utf8').trim();
    expect(statSync(`${db}.http-token`).mode & 0o777).toBe(0o600);
    expect(r.stderr).not.toContain(token);
    expect(r.stdout).not.toContain(token);
    const out = JSON.parse(r.stdout) as { planner: string; tasks: Array<{ state: string; phase: string; acceptance: string | null }>; pending_approvals: number[] };
    expect(out.planner).toBe('scripted');
    expect(out.tasks.map((t) => [t.state, t.phase, t.acceptance])).toEqual([
      ['completed', 'completed', 'passed'],
      ['waiting', 'waiting_approval', null],
      ['completed', 'degraded', 'failed'],
      ['completed', 'completed', 'passed'],
      ['completed', 'completed', 'passed'],
      ['completed', 'completed', 'passed'],
    ]);
    expect(out.pending_approvals).toHaveLength(1);
  });
});
