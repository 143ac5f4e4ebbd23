import type { FastifySchemaCompiler } from 'fastify';
import type { z } from 'zod';

/** A request that failed its schema; the message names every offending field. */
export class RequestValidationError extends Error {
  readonly code = 'FST_ERR_VALIDATION';
  readonly statusCode = 400;
}

/** `command[0].x` from a zod issue path. */
function formatPath(path: PropertyKey[]): string {
  return path.reduce<string>(
    (out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)),
    '',
  );
}

/** One sentence per issue: `<field>: <what is wrong>`. */
export function describeIssues(issues: z.core.$ZodIssue[], context?: string): string {
  return issues
    .map((issue) => {
      const path = formatPath(issue.path);
      if (issue.code === 'unrecognized_keys') {
        const where = path ? ` in ${path}` : context && context !== 'body' ? ` in ${context}` : '';
        return issue.keys.map((key) => `unknown field '${key}'${where}`).join('; ');
      }
      if (issue.code === 'invalid_union') {
        // The one form the input was meant as: the only branch that got past the input's kind.
        const meant = issue.errors.filter((branch) => branch.some((inner) => inner.path.length > 0));
        const [only] = meant;
        if (meant.length === 1 && only) {
          return describeIssues(only.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })), context);
        }
      }
      if (issue.code === 'invalid_key') {
        return `${path}: ${issue.issues.map((inner) => inner.message).join(', ')}`;
      }
      const missing = issue.code === 'invalid_type' && (issue.input === undefined || (issue.input === null && !path));
      const subject = path || (context === 'body' ? 'body' : context ?? 'request');
      return `${subject}: ${missing ? (path ? 'is required' : 'a JSON object is required') : issue.message}`;
    })
    .join('; ');
}

const KINDS: Record<string, string> = {
  object: 'a JSON object',
  record: 'a JSON object',
  array: 'an array',
  tuple: 'an array',
  string: 'a string',
  number: 'a number',
  int: 'an integer',
  bigint: 'an integer',
  boolean: 'a boolean',
  date: 'a date',
};
const kind = (expected: string): string => KINDS[expected] ?? expected;
const COUNTED: Record<string, string> = { string: 'characters', array: 'items', set: 'items', file: 'bytes' };

/**
 * The words of this API for every kind of zod issue, used where a schema gives none of its own:
 * zod's default wording ("Invalid input: expected object, received array") never reaches a client.
 */
export function plainWords(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case 'invalid_type':
      return `must be ${kind(issue.expected)}`;
    case 'too_small': {
      const unit = COUNTED[issue.origin];
      const min = Number(issue.minimum);
      if (unit) return min === 1 && unit !== 'bytes' ? 'must not be empty' : `must hold at least ${min} ${unit}`;
      return issue.inclusive === false ? `must be greater than ${min}` : `must be at least ${min}`;
    }
    case 'too_big': {
      const unit = COUNTED[issue.origin];
      const max = Number(issue.maximum);
      if (unit) return `must hold at most ${max} ${unit}`;
      return issue.inclusive === false ? `must be less than ${max}` : `must be at most ${max}`;
    }
    case 'invalid_format':
      return issue.format === 'regex' ? 'has an invalid format' : `must be a valid ${issue.format === 'uuid' ? 'UUID' : issue.format}`;
    case 'not_multiple_of':
      return `must be a multiple of ${String(issue.divisor)}`;
    case 'invalid_value':
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`;
    case 'invalid_union':
      return 'does not match any accepted form';
    case 'invalid_key':
      return 'has an invalid key';
    case 'invalid_element':
      return 'has an invalid element';
    case 'unrecognized_keys':
      return `unknown fields ${issue.keys.join(', ')}`;
    default:
      return 'is invalid';
  }
}

/**
 * Fastify validator compiler for zod schemas: parsed values replace the raw input, and a
 * failure becomes a RequestValidationError whose message names each field.
 */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data: unknown) => {
    const result = schema.safeParse(data, { reportInput: true, error: plainWords });
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(describeIssues(result.error.issues, httpPart)) };
  };
