import { defineConfig } from 'vitest/config';

/** `npm run fuzz`: the fuzz test only (test/fuzz/*.fuzz.ts), which `npm test` does not run. */
export default defineConfig({
  test: {
    include: ['test/fuzz/**/*.fuzz.ts'],
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 180_000,
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
