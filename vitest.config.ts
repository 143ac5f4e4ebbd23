import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Integration tests share one Docker engine on a 2-core machine: run files one at a time.
    fileParallelism: false,
    // Servers a test spawns (serve, mcp) take the shared network name, as servers did before
    // deployment ids: a new data directory's own networks and chains would outlive the test.
    // A test that wants a deployment's own passes SANDBOXD_NETWORK_NAME: undefined, and removes them.
    env: { SANDBOXD_NETWORK_NAME: 'sandboxd' },
    testTimeout: 120_000,
    hookTimeout: 180_000,
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
