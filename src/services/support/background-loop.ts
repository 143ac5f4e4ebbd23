import type { Logger } from '../../telemetry/logger.js';

/**
 * Runs `work` every `seconds` (0 disables) in the background, one run at a time: the next
 * run is timed from the end of the last. A failure is logged and the loop goes on. The
 * returned function stops the loop and waits for a run under way.
 */
export function repeatEvery(seconds: number, work: () => Promise<unknown>, logger: Logger): () => Promise<void> {
  if (seconds <= 0) return async () => undefined;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const schedule = () => {
    timer = setTimeout(() => {
      // Also a `work` that throws before its first await ends as a logged failure.
      running = Promise.resolve()
        .then(work)
        .then(
          () => undefined,
          (err: unknown) => logger.warn({ err }, 'background run failed'),
        )
        .finally(() => {
          if (!stopped) schedule();
        });
    }, seconds * 1000);
    timer.unref();
  };
  schedule();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    await running;
  };
}
