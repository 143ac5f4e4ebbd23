import type { z } from 'zod';
import { printFields, printJson } from './output.js';

/** How one field of a record shows: under another name, as other text, or not at all (another line shows it). */
export type FieldShow<T> = { as?: string; text?: (record: T) => unknown } | 'hidden';

/** Which fields lead, and how some of them show; every other field of the schema follows in the schema's order. */
export interface FieldLayout<T> {
  first?: readonly (keyof T & string)[];
  show?: { readonly [K in keyof T & string]?: FieldShow<T> };
}

/**
 * The `key: value` lines of a record for people, taken from its response schema: every field
 * the schema declares shows (a field it adds shows without an edit here), `first` in their
 * order, then the rest in the schema's order. The value of a field the record lacks is
 * undefined, which `printFields` leaves out.
 */
export function schemaFields<S extends z.ZodObject>(schema: S, record: z.output<S>, { first = [], show = {} }: FieldLayout<z.output<S>>): [string, unknown][] {
  const values = record as Record<string, unknown>;
  const keys = [...first, ...Object.keys(schema.shape).filter((key) => !first.includes(key))];
  return keys.flatMap((key): [string, unknown][] => {
    const how: FieldShow<z.output<S>> | undefined = show[key];
    if (how === 'hidden') return [];
    return [[how?.as ?? key, how?.text ? how.text(record) : values[key]]];
  });
}

/** A record as the API gave it (`--json`), or its `key: value` lines for people. */
export function printRecord<S extends z.ZodObject>(schema: S, record: z.output<S>, layout: FieldLayout<z.output<S>>, json: boolean): void {
  if (json) return printJson(record);
  printFields(schemaFields(schema, record, layout));
}
