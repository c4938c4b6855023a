import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The scale-out scenario (a Temporal cluster, four Gantry processes, kill -9) runs alone: `npm run test:scale`.
    exclude: process.env.GANTRY_TEST_SCALE === '1' ? ['**/node_modules/**'] : ['**/node_modules/**', 'test/scale/**'],
    globalSetup: ['test/support/global-setup.ts'],
    // Integration tests share one Temporal and one PostgreSQL server; files run in parallel, each
    // with databases and task queues of its own. Most of their time is waiting (workers starting,
    // timers), so three at once on two cores: 6.6 min for the suite instead of 8.
    pool: 'forks',
    poolOptions: { forks: { maxForks: 3 } },
    testTimeout: 60_000,
    hookTimeout: 180_000,
    reporters: ['default'],
  },
});
