#!/usr/bin/env node
// Runs vitest and ends with the plain line CI reads: `N passed, N failed`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'taskloop-vitest-'));
const report = join(dir, 'report.json');
const unhandledFile = join(dir, 'unhandled');
const run = spawnSync(
  process.execPath,
  [
    'node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`,
    '--reporter=./scripts/vitest-unhandled.mjs', ...process.argv.slice(2),
  ],
  { stdio: 'inherit', env: { ...process.env, TASKLOOP_UNHANDLED_FILE: unhandledFile } },
);
let passed = 0;
let failed = 0;
try {
  const json = JSON.parse(readFileSync(report, 'utf8'));
  passed = json.numPassedTests;
  // A file that fails to load has no failed test of its own: count it once.
  failed = json.numFailedTests || json.numFailedTestSuites || 0;
} catch {
  failed = Math.max(1, failed);
}
// An unhandled error fails the run (vitest prints it; see scripts/vitest-unhandled.mjs).
let unhandled = 0;
try {
  unhandled = Number(readFileSync(unhandledFile, 'utf8')) || 0;
} catch {
  // No file: the reporter never ran (vitest failed early; its exit status says so).
}
if (unhandled > 0) {
  console.log(`${unhandled} unhandled error(s) during the run, counted as failed`);
  failed += unhandled;
}
rmSync(dir, { recursive: true, force: true });
if (run.status !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed`);
process.exit(run.status === 0 && failed === 0 ? 0 : 1);
