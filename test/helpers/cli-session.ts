import { expect } from 'vitest';
import { runCli } from './server-process.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The built CLI as a script runs it, against the server `env` points at: output piped, so no
 * escape code may appear anywhere. `input`, when given, is its standard input.
 */
export function cliSession(env: () => NodeJS.ProcessEnv): { cli: (...args: string[]) => Promise<CliResult>; cliWithInput: (input: string, ...args: string[]) => Promise<CliResult> } {
  const check = (result: CliResult) => {
    expect(result.stdout + result.stderr, 'no escape codes when piped').not.toContain('\u001b');
    return result;
  };
  return {
    cli: async (...args) => check(await runCli(args, env())),
    cliWithInput: async (input, ...args) => check(await runCli(args, env(), input)),
  };
}

/** The rows of a table the CLI printed, split at its column gaps (two spaces or more). */
export const tableRows = (stdout: string): string[][] =>
  stdout
    .trimEnd()
    .split('\n')
    .map((line) => line.split(/ {2,}/));

/** Parses the JSON a `--json` command printed, failing with its stderr when it did not succeed. */
export function jsonOf<T = any>(result: CliResult): T {
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as T;
}
