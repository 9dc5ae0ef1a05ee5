import { defineConfig } from 'vitest/config';

/**
 * The store contract: these files run twice, once per store. Everything else runs on SQLite
 * only. Run one half alone with `npm test -- --project sqlite` or `--project postgres`.
 */
export const CONTRACT = [
  'test/engine/task-manager.*.test.ts',
  'test/engine/tail.test.ts',
  'test/engine/authority.test.ts',
  'test/engine/states.test.ts',
  'test/engine/bus.test.ts',
  'test/engine/json-depth.test.ts',
  'test/engine/authority-stores.test.ts',
  'test/engine/run-stats.test.ts',
  'test/workers/loop.*.test.ts',
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
