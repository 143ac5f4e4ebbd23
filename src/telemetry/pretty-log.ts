import type { DestinationStream } from 'pino';

/** pino's numeric levels, their names and colours (SGR codes). */
const LEVELS: Record<number, [string, string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '36'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
};

/** Fields every line has, shown in their own places or not at all. */
const OWN_PLACE = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service', 'err']);

/**
 * A pino destination that writes each record as one readable line, as pino-pretty does
 * (which this project does not depend on): `12:03:04.512 INFO  message key=value ...`, the
 * level coloured when `colour` is on, an error's stack indented below. Secrets were already
 * redacted by the logger before the record reaches here.
 */
export function prettyDestination(out: NodeJS.WritableStream, colour: boolean): DestinationStream {
  return { write: (record: string) => void out.write(prettyLine(record, colour)) };
}

/** One JSON record as its readable line(s), ending in a newline; a line that is not JSON passes as it is. */
export function prettyLine(record: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(record) as Record<string, unknown>;
  } catch {
    return record.endsWith('\n') ? record : `${record}\n`;
  }
  const paint = (code: string, text: string) => (colour ? `\u001b[${code}m${text}\u001b[0m` : text);
  const [name, code] = LEVELS[Number(entry.level)] ?? [String(entry.level).toUpperCase().padEnd(5), '0'];
  const time = typeof entry.time === 'number' ? new Date(entry.time).toISOString().slice(11, 23) : '';
  const fields = Object.entries(entry)
    .filter(([key]) => !OWN_PLACE.has(key))
    .map(([key, value]) => `${paint('2', `${key}=`)}${typeof value === 'string' && !/\s/.test(value) ? value : JSON.stringify(value)}`);
  const err = entry.err as { message?: unknown; stack?: unknown } | undefined;
  const stack = typeof err?.stack === 'string' ? `\n${err.stack.replace(/^/gm, '    ')}` : err?.message ? ` err=${JSON.stringify(err.message)}` : '';
  const message = typeof entry.msg === 'string' ? entry.msg : '';
  return `${paint('2', time)} ${paint(code, name)} ${message}${fields.length ? ` ${fields.join(' ')}` : ''}${stack}\n`;
}
