import type { Counter } from 'prom-client';
import type { Logger } from './logger.js';

/** The process events that end Node for an error no code handled. */
type CrashEvent = 'uncaughtException' | 'unhandledRejection';

/** The part of `process` the guard listens on (the process itself, or a stand-in in tests). */
export interface GuardedProcess {
  on(event: CrashEvent, listener: (error: unknown) => void): unknown;
  off(event: CrashEvent, listener: (error: unknown) => void): unknown;
}

/**
 * Keeps a serving process alive through an error that escaped every handler (an `error` event
 * without a listener, a rejected promise no one awaited): it is logged with its stack and
 * counted in `sandboxd_uncaught_errors_total{kind}`, and the server goes on answering. Such an
 * error is a bug: the test suite fails on any (vitest reports them), and the fuzz test checks the
 * counter. Returns the function that removes the guard.
 */
export function installCrashGuard(
  target: GuardedProcess,
  logger: Logger,
  counter: Pick<Counter<'kind'>, 'inc'>,
): () => void {
  const onException = (error: unknown) => {
    counter.inc({ kind: 'exception' });
    logger.error({ err: error }, 'uncaught exception: a bug; the server goes on serving');
  };
  const onRejection = (error: unknown) => {
    counter.inc({ kind: 'rejection' });
    logger.error({ err: error }, 'unhandled promise rejection: a bug; the server goes on serving');
  };
  target.on('uncaughtException', onException);
  target.on('unhandledRejection', onRejection);
  return () => {
    target.off('uncaughtException', onException);
    target.off('unhandledRejection', onRejection);
  };
}
