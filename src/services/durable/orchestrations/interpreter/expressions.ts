/**
 * `${path}` expressions of the orchestration DSL: no code, no functions, only paths into the
 * data an instance has (docs/decisions.md, "Orchestrations (interpreter)").
 *
 * - A string that is exactly one `${...}` yields the raw JSON value at the path; any other
 *   string is interpolated (strings as they are, other values as JSON). `$${` is a literal
 *   `${` (so `sh -c 'echo $${HOME}'` reaches the shell as `${HOME}`).
 * - Paths: `input...`, `steps.<id>.output...`, `steps.<id>.{exit_code,stderr,status}`,
 *   `item...`, `index`, `orchestration.{id,name}`. Segments are `.name` (letters, digits, `_`,
 *   `-`) or `[n]`; a digit-only `.n` on an array indexes it too.
 * - A path that leads nowhere at run time (a missing field, an index past the end, a field of a
 *   non-object) is an error that fails the step; it is never silently null. Conditions are the
 *   exception: there a missing path is "absent" (`exists` false), see conditions.ts.
 */
import type { JsonValue } from './dsl.js';

export type PathSegment = string | number;

/** One parsed `${...}`: its text (without `${}`) and its segments, the root first. */
export interface ExpressionPath {
  text: string;
  segments: PathSegment[];
}

export type TemplatePart = { literal: string } | { path: ExpressionPath };

/** A malformed expression or one that leads nowhere; `message` has no location prefix. */
export class ExpressionError extends Error {
  override name = 'ExpressionError';
}

const NAME = /^[A-Za-z0-9_-]+$/;

/** The segments of a path such as `steps.list.output.files[0]`; throws ExpressionError. */
export function parsePath(text: string): ExpressionPath {
  const segments: PathSegment[] = [];
  let rest = text.trim();
  if (!rest) throw new ExpressionError('an empty path');
  let first = true;
  while (rest) {
    if (rest.startsWith('[')) {
      const close = rest.indexOf(']');
      const inner = close > 0 ? rest.slice(1, close) : '';
      if (!/^\d{1,9}$/.test(inner)) throw new ExpressionError(`'${text}' is not a valid path: [...] takes an array index`);
      segments.push(Number(inner));
      rest = rest.slice(close + 1);
    } else {
      if (!first) {
        if (!rest.startsWith('.')) throw new ExpressionError(`'${text}' is not a valid path`);
        rest = rest.slice(1);
      }
      // A name runs to the next `.` or `[` (or the end); it may be empty, which NAME refuses.
      const match = rest.match(/^[^.[]*/)?.[0] ?? '';
      if (!NAME.test(match)) throw new ExpressionError(`'${text}' is not a valid path: names are letters, digits, '_' and '-'`);
      segments.push(match);
      rest = rest.slice(match.length);
    }
    first = false;
  }
  return { text: text.trim(), segments };
}

/** The literal and `${...}` parts of a string; throws ExpressionError on an unclosed `${`. */
export function parseTemplate(text: string): TemplatePart[] {
  const parts: TemplatePart[] = [];
  let literal = '';
  let at = 0;
  while (at < text.length) {
    if (text.startsWith('$${', at)) {
      literal += '${';
      at += 3;
    } else if (text.startsWith('${', at)) {
      const close = text.indexOf('}', at + 2);
      if (close < 0) throw new ExpressionError(`'${text}' has a '\${' without its '}'`);
      if (literal) parts.push({ literal });
      literal = '';
      parts.push({ path: parsePath(text.slice(at + 2, close)) });
      at = close + 1;
    } else {
      literal += text[at];
      at += 1;
    }
  }
  if (literal || parts.length === 0) parts.push({ literal });
  return parts;
}

/** Every `${...}` inside a JSON value, with where it sits (`command[1]`, `args.by`); a malformed one as its error. */
export function expressionsIn(value: unknown, where = ''): ({ where: string; path: ExpressionPath } | { where: string; error: string })[] {
  const found: ({ where: string; path: ExpressionPath } | { where: string; error: string })[] = [];
  const walk = (node: unknown, at: string): void => {
    if (typeof node === 'string') {
      let parts: TemplatePart[];
      try {
        parts = parseTemplate(node);
      } catch (err) {
        if (!(err instanceof ExpressionError)) throw err;
        found.push({ where: at, error: err.message });
        return;
      }
      for (const part of parts) if ('path' in part) found.push({ where: at, path: part.path });
    } else if (Array.isArray(node)) {
      node.forEach((child, index) => walk(child, `${at}[${index}]`));
    } else if (node !== null && typeof node === 'object') {
      for (const [key, child] of Object.entries(node)) walk(child, at ? `${at}.${key}` : key);
    }
  };
  walk(value, where);
  return found;
}

/**
 * True when a string holds at least one `${...}` (an escaped `$${` does not count). A malformed
 * one counts too, so that the check of expressions reports it.
 */
export function hasExpression(text: string): boolean {
  try {
    return parseTemplate(text).some((part) => 'path' in part);
  } catch (err) {
    if (err instanceof ExpressionError) return true;
    throw err;
  }
}

/** What a finished step offers to expressions. */
export interface StepFacts {
  output: JsonValue;
  exit_code: number | null;
  stderr: string | null;
  status: 'completed' | 'failed' | 'skipped';
}

/** The data an expression sees at one place of one instance. */
export interface ExpressionContext {
  input: JsonValue;
  orchestration: { id: string; name: string };
  /** The steps visible here, by id. */
  steps: ReadonlyMap<string, StepFacts>;
  /** The innermost enclosing map's item and index; undefined outside a map. */
  map?: { item: JsonValue; index: number };
}

export type Lookup = { found: true; value: JsonValue } | { found: false; reason: string };

/** Walks `segments` from `value`; `found: false` with a reason when the path leads nowhere. */
function walk(value: JsonValue, segments: PathSegment[], shown: string): Lookup {
  let current = value;
  let at = shown;
  for (const segment of segments) {
    if (Array.isArray(current) && (typeof segment === 'number' || /^\d+$/.test(segment))) {
      const index = Number(segment);
      const item = current[index];
      if (item === undefined) return { found: false, reason: `${at} has ${current.length} items, no index ${index}` };
      current = item;
      at = `${at}[${index}]`;
    } else if (current !== null && typeof current === 'object' && !Array.isArray(current) && typeof segment === 'string') {
      const field = Object.hasOwn(current, segment) ? current[segment] : undefined;
      if (field === undefined) return { found: false, reason: `${at} has no field '${segment}'` };
      current = field;
      at = `${at}.${segment}`;
    } else {
      const kind = current === null ? 'null' : Array.isArray(current) ? 'an array' : `a ${typeof current}`;
      return { found: false, reason: `${at} is ${kind}, it has no ${typeof segment === 'number' ? `index ${segment}` : `field '${segment}'`}` };
    }
  }
  return { found: true, value: current };
}

/** The value at a path in `context`; `found: false` with a reason when it leads nowhere. */
export function lookup(context: ExpressionContext, path: ExpressionPath): Lookup {
  const [root, ...rest] = path.segments;
  switch (root) {
    case 'input':
      return walk(context.input, rest, 'input');
    case 'orchestration':
      return walk(context.orchestration, rest, 'orchestration');
    case 'item':
    case 'index':
      if (!context.map) return { found: false, reason: `'${root}' exists only inside a map` };
      return walk(root === 'item' ? context.map.item : context.map.index, rest, root);
    case 'steps': {
      const [id, field, ...deeper] = rest;
      const facts = typeof id === 'string' ? context.steps.get(id) : undefined;
      if (!facts) return { found: false, reason: `step '${String(id)}' has not run here` };
      if (typeof field !== 'string' || !Object.hasOwn(facts, field)) return { found: false, reason: `steps.${id} has no field '${String(field)}'` };
      return walk(facts[field as keyof StepFacts], deeper, `steps.${id}.${field}`);
    }
    default:
      return { found: false, reason: `unknown root '${String(root)}'` };
  }
}

/** Resolves one string: the raw value for exactly one `${...}`, interpolated text otherwise. */
export function resolveString(text: string, context: ExpressionContext): JsonValue {
  const parts = parseTemplate(text);
  const only = parts.length === 1 ? parts[0] : undefined;
  if (only && 'path' in only) return need(context, only.path);
  return parts
    .map((part) => {
      if ('literal' in part) return part.literal;
      const value = need(context, part.path);
      return typeof value === 'string' ? value : JSON.stringify(value);
    })
    .join('');
}

function need(context: ExpressionContext, path: ExpressionPath): JsonValue {
  const result = lookup(context, path);
  if (!result.found) throw new ExpressionError(`\${${path.text}} leads nowhere: ${result.reason}`);
  return result.value;
}

/**
 * Resolves every string inside a JSON value (object values and array items, at any depth; keys
 * stay as written). Throws ExpressionError naming where (`command[1]: ${input.x} leads nowhere: ...`).
 */
export function resolveDeep(value: JsonValue, context: ExpressionContext, where = ''): JsonValue {
  if (typeof value === 'string') {
    try {
      return resolveString(value, context);
    } catch (err) {
      if (err instanceof ExpressionError && where) throw new ExpressionError(`${where}: ${err.message}`);
      throw err;
    }
  }
  if (Array.isArray(value)) return value.map((child, index) => resolveDeep(child, context, `${where}[${index}]`));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, resolveDeep(child, context, where ? `${where}.${key}` : key)]));
  }
  return value;
}
