import type { OptionName } from '../config/config-schema.js';
import { ConfigError, loadConfig } from '../config/load-config.js';
import type { Config } from '../config/config-schema.js';

/** Accumulates a repeatable flag's values. */
export const collect = (value: string, previous: string[] = []) => [...previous, value];

/**
 * The configuration from parsed commander options (`--config`, `--api-key` and the flags
 * named like config options), or undefined after printing what to fix.
 */
export function configFromOptions(opts: Record<string, unknown>): Config | undefined {
  // Repeatable flags are named in the singular; their options hold lists.
  const { config: configFile, apiKey, webhookUrl, ...rest } = opts;
  const flags: Partial<Record<OptionName, unknown>> = { ...rest, apiKeys: apiKey, webhookUrls: webhookUrl };
  try {
    return loadConfig({ ...(typeof configFile === 'string' ? { configFile } : {}), flags });
  } catch (err) {
    if (err instanceof ConfigError) return void fail(err.message);
    throw err;
  }
}

/** Prints `sandboxd: <message>` on stderr and sets exit code 2. */
export function fail(message: string): void {
  process.stderr.write(`sandboxd: ${message}\n`);
  process.exitCode = 2;
}
