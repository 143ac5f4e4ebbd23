import type { Reporter, SerializedError, TestModule } from 'vitest/node';

/**
 * Prints one plain closing line, `N passed, N failed, N skipped`, after vitest's own summary,
 * for tools that read a run's verdict from its last line. An error that escaped every handler
 * (an uncaught exception, an unhandled rejection) fails the run (vitest exits 1) and counts as
 * a failure here too: in the server it would be a bug, logged and counted by the crash guard.
 * Before it, the ten slowest files: where a run's time goes (CI's budget is an hour).
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<SerializedError> = []): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed' || state === 'failed') counts[state]++;
        else counts.skipped++;
      }
      if (module.state() === 'failed' && [...module.children.allTests()].length === 0) counts.failed++;
    }
    const slowest = [...testModules].sort((a, b) => b.diagnostic().duration - a.diagnostic().duration).slice(0, 10);
    process.stdout.write('\nslowest files:\n');
    for (const module of slowest) {
      process.stdout.write(`  ${(module.diagnostic().duration / 1000).toFixed(1).padStart(7)} s  ${module.moduleId.replace(`${process.cwd()}/`, '')}\n`);
    }
    if (unhandledErrors.length > 0) {
      counts.failed += unhandledErrors.length;
      process.stdout.write(`\n${unhandledErrors.length} unhandled error(s) escaped the tests: each counts as a failure\n`);
    }
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
