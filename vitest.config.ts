import { defineConfig } from 'vitest/config';

/** The servers the api and integration layers share (one PostgreSQL, one Temporal per run). */
const SERVERS = 'test/support/global-setup.ts';

export default defineConfig({
  test: {
    // Three layers, run one after another by `npm test` (sequence.groupOrder):
    // - unit: functions alone, no servers; seconds (`npm run test:unit`);
    // - api: the API in-process (app.inject or a socket) over PostgreSQL, no Temporal worker;
    // - integration: Temporal workers, SSH hosts, containers, browsers, the hosted clients.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], sequence: { groupOrder: 0 } } },
      {
        extends: true,
        test: { name: 'api', include: ['test/api/**/*.test.ts'], globalSetup: [SERVERS], sequence: { groupOrder: 1 } },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          // The scale-out scenario (a Temporal cluster, four Gantry processes, kill -9) runs alone: `npm run test:scale`.
          exclude: [
            '**/node_modules/**',
            'test/unit/**',
            'test/api/**',
            ...(process.env.GANTRY_TEST_SCALE === '1' ? [] : ['test/scale/**']),
          ],
          globalSetup: [SERVERS],
          sequence: { groupOrder: 2 },
        },
      },
    ],
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
