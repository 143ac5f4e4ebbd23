import { readFile } from 'node:fs/promises';
import { integer, UsageError } from './output.js';

/** All of standard input as text. */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * The text of an argument that may name where it is: `@FILE` is the file's text, `-` standard
 * input's, anything else the argument itself. A file that cannot be read fails the command
 * (exit 1), as `cp` does for a missing local file.
 */
export async function textInput(given: string): Promise<string> {
  if (given === '-') return readStdin();
  if (!given.startsWith('@')) return given;
  const file = given.slice(1);
  return readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    throw new Error(err.code === 'ENOENT' ? `${file}: no such file or directory` : `${file}: ${err.message}`);
  });
}

/** JSON given on the command line (itself, `@FILE` or `-`), or a usage error naming `what` and why it is not JSON. */
export async function jsonInput(given: string, what: string): Promise<unknown> {
  const text = await textInput(given);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new UsageError(`${what}: not JSON (${(err as Error).message}); quote it for the shell, e.g. '{"key": "value"}'`);
  }
}

/** JSON that must be an object (a body's `config`, a method's `args`), or a usage error naming `what`. */
export async function jsonObject(given: string, what: string): Promise<Record<string, unknown>> {
  const value = await jsonInput(given, what);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError(`${what}: must be a JSON object, e.g. '{"key": "value"}'`);
  return value as Record<string, unknown>;
}

/** A flag's value that must be one of `allowed`, or a usage error naming the flag and the accepted values. */
export function oneOf<T extends string>(value: string, allowed: readonly T[], flag: string): T {
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} '${value}': expected one of ${allowed.join(', ')}`);
  return value as T;
}

/** `KEY=VALUE` settings as an object: each value read as JSON when it is JSON (`5432`, `true`), else as text. */
export function settings(values: string[] | undefined, flag: string): Record<string, unknown> {
  const result: Record<string, unknown> = {};
  for (const item of values ?? []) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new UsageError(`${flag} '${item}': expected KEY=VALUE`);
    result[item.slice(0, eq)] = jsonOrText(item.slice(eq + 1));
  }
  return result;
}

/** A value read as JSON when it is JSON (`5432`, `true`, `null`, `"x"`), else the text itself. */
export function jsonOrText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** `--limit N` as a query parameter (nothing without it); a usage error when it is not a whole number. */
export function limitQuery(limit: string | undefined): Record<string, string> {
  return limit === undefined ? {} : { limit: String(integer(limit, '--limit')) };
}
