/**
 * `npm run tour` (scripts/tour.sh), the README's first step: it runs to its end on a fresh
 * database, echoes each command as it could be typed again, and leaves what it says.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, tempDir } from '../helpers.js';
import { cliJson } from './helpers.js';

function tour(db: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [join(ROOT, 'scripts/tour.sh')], { env: { ...process.env, TASKLOOP_DB: db } }, (error, _stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stderr });
    });
  });
}

describe('the tour', () => {
  it('runs to its end: the first task accepted, the one that depends on it released; commands echoed with their quotes', async () => {
    const db = join(tempDir(), 'tour.db');
    const r = await tour(db);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('$ taskloop task create --title "Fetch the release notes" --priority 5\n');
    expect(r.stderr).toContain('$ taskloop --as writer-bot task transition 1 review --token ');
    const tasks = await cliJson<Array<{ id: number; title: string; state: string }>>(db, 'task', 'list');
    expect(tasks.map((t) => [t.title, t.state])).toEqual([
      ['Fetch the release notes', 'completed'],
      ['Summarise them for the changelog', 'pending'],
    ]);
  });
});
