/**
 * The content hash of a definition, for versioning: a definition posted again gets version + 1
 * only when its hash changes. The hash covers what an instance runs (description, defaults,
 * steps, output), not the name, and not key order or formatting: keys are sorted at every level
 * before hashing, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are the same content.
 */
import { createHash } from 'node:crypto';
import type { Definition } from './dsl.js';

/** JSON text with object keys sorted at every level. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, child]) => child !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, child]) => `${JSON.stringify(key)}:${canonicalJson(child)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** sha256 (hex) of the definition's content. */
export function definitionHash(definition: Definition): string {
  const { description, defaults, steps, output } = definition;
  return createHash('sha256').update(canonicalJson({ description, defaults, steps, output })).digest('hex');
}
