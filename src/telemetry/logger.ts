import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The service logger. It always writes to stderr so that stdout stays clean for the MCP
 * server's protocol; child loggers carry per-request or per-sandbox bindings.
 */
export function createLogger(level: string = process.env.SANDBOXD_LOG_LEVEL ?? 'info'): Logger {
  return pino({ level, base: { service: 'sandboxd' } }, pino.destination({ fd: 2, sync: false }));
}

/** A logger that drops everything, for tests and quiet tools. */
export const silentLogger = (): Logger => pino({ level: 'silent' });
