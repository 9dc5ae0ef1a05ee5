import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that take a minute or more start first: on a clean clone vitest has no timings and
 * runs larger files first, so check-package (a small file that packs, installs and typechecks
 * for 60-90 s) started last and the other worker sat idle through it.
 */
const LONG_FIRST = ['test/package/check-package.test.ts'];

class LongFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const at = LONG_FIRST.findIndex((p) => f.moduleId.endsWith(p));
      return at < 0 ? LONG_FIRST.length : at;
    };
    return sorted.map((f, i) => ({ f, i })).sort((a, b) => rank(a.f) - rank(b.f) || a.i - b.i).map(({ f }) => f);
  }
}

/**
 * The store contract: these files run twice, once per store. Everything else runs on SQLite
 * only. Run one half alone with `npm test -- --project sqlite` or `--project postgres`.
 */
export const CONTRACT = [
  'test/engine/task-manager.*.test.ts',
  'test/engine/tail.test.ts',
  'test/engine/follow-hub.*.test.ts',
  'test/engine/authority.test.ts',
  'test/engine/states.test.ts',
  'test/engine/bus.test.ts',
  'test/engine/json-depth.test.ts',
  'test/engine/authority-stores.test.ts',
  'test/engine/wake-queues.test.ts',
  'test/engine/run-stats.test.ts',
  'test/engine/store-input.test.ts',
  'test/engine/run-writes.test.ts',
  'test/workers/loop.*.test.ts',
  'test/workers/daemon-delayed.test.ts',
  'test/workers/gate.test.ts',
  'test/workers/plan.test.ts',
  'test/workers/acceptance.test.ts',
  'test/workers/approvals.test.ts',
  'test/workers/retention.test.ts',
  'test/workers/run-screens.test.ts',
  'test/workers/vision.test.ts',
  'test/security/*.test.ts',
  'test/plugins/restart-policy.test.ts',
  'test/plugins/hooks.test.ts',
  'test/tools/tickets.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: the concurrency tests start their own processes and threads.
    maxWorkers: 2,
    sequence: { sequencer: LongFirst },
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: ['test/pg/**'] } },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: [...CONTRACT, 'test/pg/**/*.test.ts'],
          globalSetup: ['test/pg/global-setup.ts'],
          env: { TASKLOOP_TEST_STORE: 'postgres' },
        },
      },
    ],
  },
});
