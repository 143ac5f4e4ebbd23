import { defineConfig } from 'vitest/config';
import { POSTGRES_LANE } from './test/lanes/postgres-lane-config.js';

export default defineConfig({
  test: {
    // Servers a test spawns (serve, mcp) take the shared network name, as servers did before
    // deployment ids: a new data directory's own networks and chains would outlive the test.
    // A test that wants a deployment's own passes SANDBOXD_NETWORK_NAME: undefined, and removes them.
    env: { SANDBOXD_NETWORK_NAME: 'sandboxd' },
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', './test/summary-reporter.ts'],
    // Three lanes, one file at a time in each (with one worker on a 2-core machine, one file at a
    // time over all three): the unit files (the fake backend, no Docker), the files that share the
    // one Docker engine, and the unit files again with every store on PostgreSQL.
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], fileParallelism: false } },
      {
        extends: true,
        test: { name: 'docker', include: ['test/**/*.test.ts'], exclude: ['test/unit/**'], fileParallelism: false },
      },
      { extends: true, test: { ...POSTGRES_LANE, env: { ...POSTGRES_LANE.env, SANDBOXD_NETWORK_NAME: 'sandboxd' } } },
    ],
  },
});
