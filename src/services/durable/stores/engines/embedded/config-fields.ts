import { badRequest } from '../../../../../errors.js';

/** One config field of an embedded kind: an integer in a range or a boolean, with its default. */
export type ConfigField = { type: 'integer'; min: number; max: number; default: number } | { type: 'boolean'; default: boolean };

/** Every kind's stores may be made read-only; the service enforces it through `commandWrites`. */
export const READ_ONLY_FIELD: ConfigField = { type: 'boolean', default: false };

/**
 * Checks a kind's config against its fields and returns it with every default filled in; null
 * stands for the default (a PATCH that removes a setting). Unknown fields are refused (a typo
 * must not silently fall back to a default); each problem is a 400 naming `config.<field>`.
 */
export function checkConfigFields(kind: string, config: Record<string, unknown>, fields: Record<string, ConfigField>): Record<string, unknown> {
  const unknown = Object.keys(config).filter((name) => !Object.hasOwn(fields, name));
  if (unknown.length > 0) {
    const names = unknown.map((name) => `config.${name}`).join(', ');
    throw badRequest(`${names}: unknown field${unknown.length > 1 ? 's' : ''} for a ${kind} store (known: ${Object.keys(fields).join(', ')})`);
  }
  const checked: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    const value = config[name] ?? field.default;
    if (field.type === 'boolean' && typeof value !== 'boolean') throw badRequest(`config.${name}: must be true or false`);
    if (field.type === 'integer' && (!Number.isSafeInteger(value) || (value as number) < field.min || (value as number) > field.max)) {
      throw badRequest(`config.${name}: must be an integer between ${field.min} and ${field.max}`);
    }
    checked[name] = value;
  }
  return checked;
}
