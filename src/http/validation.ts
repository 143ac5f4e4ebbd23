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
        if (meant.length === 1) {
          return describeIssues(meant[0]!.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })), context);
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

/**
 * Fastify validator compiler for zod schemas: parsed values replace the raw input, and a
 * failure becomes a RequestValidationError whose message names each field.
 */
export const zodValidatorCompiler: FastifySchemaCompiler<z.ZodType> =
  ({ schema, httpPart }) =>
  (data: unknown) => {
    const result = schema.safeParse(data, { reportInput: true });
    if (result.success) return { value: result.data };
    return { error: new RequestValidationError(describeIssues(result.error.issues, httpPart)) };
  };
