import { connect, type Connection, type GlobalFlags } from './connection.js';
import { reportFailure } from './output.js';

/** What every client command gets: the global flags and, on first use, the connection to the server. */
export interface ClientContext {
  readonly flags: GlobalFlags;
  connection(): Connection;
}

export function clientContext(flags: GlobalFlags): ClientContext {
  let connection: Connection | undefined;
  return { flags, connection: () => (connection ??= connect(flags)) };
}

/** A commander action that reports its failure (message, next step, exit code) instead of throwing. */
export function action<A extends unknown[]>(work: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      await work(...args);
    } catch (err) {
      reportFailure(err);
    }
  };
}
