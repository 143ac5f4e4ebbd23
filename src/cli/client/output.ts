import { withNextStep, type NextStepRenderers } from '../../errors.js';
import { ServiceError } from '../../errors.js';
import { HTTP_NEXT_STEPS } from '../../http/errors.js';

/** The next steps in the words of the command line: the sandboxd command that does it (the API route where no command does). */
export const CLI_NEXT_STEPS: NextStepRenderers = {
  start: ({ sandbox }) => `start it with \`sandboxd sandbox start ${sandbox}\``,
  recover: ({ sandbox, then }) =>
    then === 'start'
      ? `recover it with \`sandboxd sandbox recover ${sandbox}\`, then start it with \`sandboxd sandbox start ${sandbox}\``
      : `recover it first with \`sandboxd sandbox recover ${sandbox}\``,
  list_directory: ({ sandbox, path }) => `list it with \`sandboxd exec ${sandbox} -- ls -la ${path}\` or GET /sandboxes/${sandbox}/fs?path=${path}`,
  list_images: () => 'list the built images with `sandboxd images list`',
  create_volume: ({ volume }) => `create it with \`sandboxd volume create ${volume}\``,
  store_execute: ({ store }) => `use \`sandboxd store execute ${store ?? 'STORE'} SQL\``,
  store_ops: ({ store, ops }) => `it answers ${ops.map((op) => `\`sandboxd store ${op} ${store} ...\``).join(' and ')}`,
  register_class: ({ class: name }) => `register it first with \`sandboxd object class create ${name} FILE\``,
  set_llm_key: ({ provider }) => `store the key with \`sandboxd llm key set ${provider ?? 'PROVIDER'} --stdin\``,
  // No command does these: the API's words.
  browser_open: HTTP_NEXT_STEPS.browser_open,
  browser_snapshot: HTTP_NEXT_STEPS.browser_snapshot,
  delete_proxy_hook: HTTP_NEXT_STEPS.delete_proxy_hook,
  mint_terminal_token: ({ sandbox }) => `open the terminal again with \`sandboxd shell ${sandbox}\`, which mints a new token`,
};

/** Whether escape codes may go to a stream: a terminal, and NO_COLOR unset or empty (https://no-color.org). */
export function colours(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && !env.NO_COLOR;
}

const paint = (code: string) => (text: string, on: boolean) => (on ? `\u001b[${code}m${text}\u001b[0m` : text);
export const bold = paint('1');
export const dim = paint('2');
export const red = paint('31');
export const green = paint('32');
export const yellow = paint('33');

/** The usage error of a client command: printed like commander's, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * Prints a failure on stderr and sets the exit code: the API's message with its next step as
 * a sandboxd command (exit 1), a usage error (exit 2), anything else as its message (exit 1).
 */
export function reportFailure(err: unknown): void {
  const on = colours(process.stderr);
  if (err instanceof UsageError) {
    process.stderr.write(`${red('error:', on)} ${err.message}\n`);
    process.exitCode = 2;
    return;
  }
  const message = err instanceof ServiceError ? withNextStep(err.message, err.hint, CLI_NEXT_STEPS) : err instanceof Error ? err.message : String(err);
  process.stderr.write(`${red('error:', on)} ${message}\n`);
  process.exitCode = 1;
}

/** Data as scripts read it: indented JSON and a newline. */
export function printJson(data: unknown): void {
  process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
}

/** Rows under a header, columns padded to their widest cell; the header bold on a terminal. */
export function printTable(header: string[], rows: string[][]): void {
  const widths = header.map((title, col) => Math.max(title.length, ...rows.map((cells) => (cells[col] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, col) => cell.padEnd(widths[col] ?? 0)).join('   ').trimEnd();
  process.stdout.write(`${bold(line(header), colours(process.stdout))}\n`);
  for (const cells of rows) process.stdout.write(`${line(cells)}\n`);
}

/** A list as the API gave it (`--json`), or a table of a row per item for people. */
export function printList<T>(list: T[], json: boolean, header: string[], row: (item: T) => string[]): void {
  if (json) return printJson(list);
  printTable(header, list.map(row));
}

/** Fields of one object, one `key: value` line each; a field without a value (undefined, null) is left out. */
export function printFields(fields: [string, unknown][]): void {
  const shown = fields.filter(([, value]) => value !== undefined && value !== null);
  const width = Math.max(...shown.map(([key]) => key.length));
  const on = colours(process.stdout);
  for (const [key, value] of shown) {
    const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
    process.stdout.write(`${dim(`${key}:`.padEnd(width + 1), on)} ${text}\n`);
  }
}

/** `3m`, `2h`, `5d`: how long ago an RFC 3339 time was. */
export function age(since: string | undefined, now = Date.now()): string {
  if (!since) return '-';
  const seconds = Math.max(0, Math.round((now - Date.parse(since)) / 1000));
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

/** `in 5m` or `3m ago`: an RFC 3339 time from now, in either direction; `-` for none. */
export function relative(time: string | null | undefined, now = Date.now()): string {
  if (!time) return '-';
  return Date.parse(time) > now ? `in ${age(new Date(now).toISOString(), Date.parse(time))}` : `${age(time, now)} ago`;
}

/** `512 B`, `52 KiB`, `1.2 MiB`, `3.4 GiB`. */
export function sizeText(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 || value >= 10 ? Math.round(value) : value.toFixed(1)} ${units[unit]}`;
}

/** `k=v,k2=v2`, or `-`. */
export function labelText(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {});
  return entries.length ? entries.map(([k, v]) => `${k}=${v}`).join(',') : '-';
}

/**
 * A progress line for long work (cold create, snapshot, restore), on stderr and only on a
 * terminal: a spinner with the elapsed time, erased when the work ends. Piped output stays data.
 */
export async function withProgress<T>(label: string, work: Promise<T>): Promise<T> {
  if (!process.stderr.isTTY) return work;
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  const started = Date.now();
  let frame = 0;
  const draw = () => {
    const seconds = ((Date.now() - started) / 1000).toFixed(0);
    process.stderr.write(`\r\u001b[2K${frames[frame++ % frames.length]} ${label} ${seconds}s`);
  };
  draw();
  const timer = setInterval(draw, 100);
  try {
    return await work;
  } finally {
    clearInterval(timer);
    process.stderr.write('\r\u001b[2K');
  }
}

/** `KEY=VALUE` pairs of repeatable flags as an object; a pair without `=` is a usage error naming the flag. */
export function pairs(values: string[] | undefined, flag: string): Record<string, string> | undefined {
  if (!values?.length) return undefined;
  const result: Record<string, string> = {};
  for (const item of values) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new UsageError(`${flag} '${item}': expected KEY=VALUE`);
    result[item.slice(0, eq)] = item.slice(eq + 1);
  }
  return result;
}

/** A whole-number flag value, or a usage error naming the flag. */
export function integer(value: string, flag: string): number {
  if (!/^\d+$/.test(value)) throw new UsageError(`${flag} '${value}': expected a whole number`);
  return Number(value);
}

/**
 * A value for people: a string as it is, anything else as indented JSON (a method's return
 * value, a store command's result); with `--json` always as JSON.
 */
export function printValue(value: unknown, json: boolean): void {
  if (json || typeof value !== 'string') return printJson(value);
  process.stdout.write(value.endsWith('\n') ? value : `${value}\n`);
}

/**
 * `rm NAME...`: every name is tried, each removed one printed (its name, or `{removed}` with
 * `--json`); the first failure is reported after the others were removed.
 */
export async function removeEach(names: string[], remove: (name: string) => Promise<unknown>, json: boolean): Promise<void> {
  let failure: unknown;
  for (const name of names) {
    try {
      await remove(name);
      if (json) printJson({ removed: name });
      else process.stdout.write(`${name}\n`);
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure) throw failure;
}
