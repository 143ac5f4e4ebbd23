import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * Fields whose values never reach a log line: passwords and secret values one level down in a
 * logged object (`{store: {password}}`, `{secret: {value}}`), a store's `config.password` and credentials in request headers.
 * Each is replaced by `[Redacted]`; the key stays, so a line still shows that one was there.
 */
export const REDACTED_PATHS = [
  'password',
  '*.password',
  'config.password',
  '*.config.password',
  '*.value',
  'authorization',
  '*.authorization',
  '*.headers.authorization',
  '["x-api-key"]',
  '*["x-api-key"]',
  '*.headers["x-api-key"]',
  '["x-goog-api-key"]',
  '*["x-goog-api-key"]',
  '*.headers["x-goog-api-key"]',
];

/**
 * The service logger. It writes to stderr (or `destination`, for tests) so that stdout stays
 * clean for the MCP server's protocol; child loggers carry per-request or per-sandbox bindings
 * and share the redaction of secret fields.
 */
export function createLogger(level: string = process.env.SANDBOXD_LOG_LEVEL ?? 'info', destination?: DestinationStream): Logger {
  return pino({ level, base: { service: 'sandboxd' }, redact: REDACTED_PATHS }, destination ?? pino.destination({ fd: 2, sync: false }));
}

/** A logger that drops everything, for tests and quiet tools. */
export const silentLogger = (): Logger => pino({ level: 'silent' });
