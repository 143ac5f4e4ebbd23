import { badRequest, ServiceError } from '../../../../../errors.js';

/**
 * Reading a `/command` argv on the kinds whose commands sandboxd answers itself (kv, queue).
 * Every refusal is a 400 that starts with `command:` (the request field), names the command and
 * says what is wrong, in the spirit of Redis's own messages. Numbers may come as JSON numbers
 * or as decimal strings, since clients ported from Redis send every argument as a string.
 */

/** One command a kind answers: its usage line, its arity and whether it changes data. */
export interface CommandSpec {
  /** `SET key value [EX seconds | PX milliseconds] [NX | XX]`, shown when the arity is wrong. */
  usage: string;
  /** Arguments after the name, at least. */
  min: number;
  /** Arguments after the name, at most (Infinity for a list). */
  max: number;
  /** Changes data: refused on a read-only store (DEQUEUE counts: it hides messages). */
  writes: boolean;
}

/** The upper-case command name of an argv, or 400 when the argv has none. */
function commandName(argv: unknown[]): string {
  const [name] = argv;
  if (typeof name !== 'string' || name === '') {
    throw badRequest('command: must be an array whose first element is the command name (a string)');
  }
  return name.toUpperCase();
}

/** Whether a command writes; an unknown command counts as a write (the engine refuses it by name). */
export function commandWrites(specs: Record<string, CommandSpec>, argv: unknown[]): boolean {
  const name = typeof argv[0] === 'string' ? argv[0].toUpperCase() : '';
  return specs[name]?.writes ?? true;
}

/**
 * The spec of the argv's command with its arity checked, or 400 for an unknown command or a
 * wrong number of arguments.
 */
export function lookUpCommand<S extends CommandSpec>(kind: string, specs: Record<string, S>, argv: unknown[]): [string, S] {
  const name = commandName(argv);
  const spec = specs[name];
  if (!spec) {
    throw badRequest(`command: unknown ${kind} command '${clip(String(argv[0]))}' (${kind} stores answer ${Object.keys(specs).join(', ')})`);
  }
  const count = argv.length - 1;
  if (count < spec.min || count > spec.max) {
    throw badRequest(`command: wrong number of arguments for ${name} (usage: ${spec.usage})`);
  }
  return [name, spec];
}

/** A 400 about one argument of a command. */
export const argumentError = (command: string, message: string): ServiceError => badRequest(`command: ${command}: ${message}`);

/** A value shown in a message: JSON, cut at 40 characters. */
export function shown(value: unknown): string {
  return clip(JSON.stringify(value) ?? String(value));
}

function clip(text: string): string {
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/** A decimal integer as a string: an optional minus sign, no leading zeros, no spaces. */
export const DECIMAL = /^-?(0|[1-9][0-9]*)$/;

/**
 * An integer argument (a JSON number or a decimal string) within [min, max], else 400
 * `command: SET: EX must be an integer between 1 and ..., got "x"`.
 */
export function integerArg(command: string, what: string, value: unknown, min: number, max: number): number {
  const number = typeof value === 'number' ? value : typeof value === 'string' && DECIMAL.test(value) ? Number(value) : Number.NaN;
  if (!Number.isSafeInteger(number) || number < min || number > max) {
    throw argumentError(command, `${what} must be an integer between ${min} and ${max}, got ${shown(value)}`);
  }
  return number;
}

/** A string argument of 1..maxBytes UTF-8 bytes (keys, receipts, dedup ids), else 400. */
export function stringArg(command: string, what: string, value: unknown, maxBytes: number): string {
  if (typeof value !== 'string') throw argumentError(command, `${what} must be a string, got ${shown(value)}`);
  if (value === '') throw argumentError(command, `${what} must not be empty`);
  if (Buffer.byteLength(value) > maxBytes) throw argumentError(command, `${what} is longer than ${maxBytes} bytes`);
  return value;
}

/**
 * Options after the fixed arguments: `names` maps each accepted option (upper case) to whether
 * it takes a value (`EX 10`) or is a flag (`NX`). Returns the options given, upper-cased, with
 * their raw values (true for a flag). 400 for an unknown option, a missing value or an option
 * given twice.
 */
export function parseOptions(command: string, args: unknown[], names: Record<string, boolean>): Map<string, unknown> {
  const options = new Map<string, unknown>();
  const known = Object.keys(names).join(', ');
  for (let i = 0; i < args.length; i += 1) {
    const raw = args[i];
    const name = typeof raw === 'string' ? raw.toUpperCase() : undefined;
    const takesValue = name === undefined ? undefined : names[name];
    if (name === undefined || takesValue === undefined) {
      throw argumentError(command, `unknown option ${shown(raw)} (options: ${known})`);
    }
    if (options.has(name)) throw argumentError(command, `option ${name} given twice`);
    if (!takesValue) {
      options.set(name, true);
      continue;
    }
    if (i + 1 >= args.length) throw argumentError(command, `option ${name} needs a value`);
    options.set(name, args[i + 1]);
    i += 1;
  }
  return options;
}

/**
 * A JSON value as stored: its text and byte size. 413 PAYLOAD_TOO_LARGE naming the command when
 * it is larger than `maxBytes`; `field` says which (`value of 'k'`, `body`).
 */
export function serialise(command: string, field: string, value: unknown, maxBytes: number): string {
  const text = JSON.stringify(value) as string | undefined;
  if (text === undefined) throw argumentError(command, `${field} must be a JSON value`);
  const bytes = Buffer.byteLength(text);
  if (bytes > maxBytes) {
    throw new ServiceError('PAYLOAD_TOO_LARGE', `command: ${command}: ${field} is ${bytes} bytes as JSON, more than ${maxBytes}`);
  }
  return text;
}
