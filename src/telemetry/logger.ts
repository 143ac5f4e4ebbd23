import { pino, type DestinationStream, type Logger } from 'pino';
import { prettyDestination } from './pretty-log.js';

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
export function createLogger(level: string = process.env.SANDBOXD_LOG_LEVEL ?? 'info', destination?: DestinationStream, format: LogFormat = 'json'): Logger {
  return pino({ level, base: { service: 'sandboxd' }, redact: REDACTED_PATHS }, destination ?? stderrDestination(format));
}

/** `pretty`: one readable line per record; `json`: one JSON object per line; `auto`: pretty when stderr is a terminal. */
export type LogFormat = 'auto' | 'pretty' | 'json';

/**
 * Where the service's logs go: stderr, as JSON for machines (a file, journald, a collector)
 * or as readable coloured lines for a person at a terminal. Colours follow NO_COLOR.
 */
function stderrDestination(format: LogFormat): DestinationStream {
  const pretty = format === 'pretty' || (format === 'auto' && process.stderr.isTTY === true);
  if (!pretty) return pino.destination({ fd: 2, sync: false });
  return prettyDestination(process.stderr, process.stderr.isTTY === true && !process.env.NO_COLOR);
}

/** A logger that drops everything, for tests and quiet tools. */
export const silentLogger = (): Logger => pino({ level: 'silent' });
