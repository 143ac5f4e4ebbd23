/**
 * `when` conditions. A condition's `path` is a path without `${}`; its `value` may hold
 * expressions. A path that leads nowhere is "absent", never an error: `exists` and `truthy`
 * are false, `eq`, `gt`, `gte`, `lt`, `lte` and `in` are false, `ne` is true. Order comparisons
 * hold only between two numbers or two strings.
 */
import type { Condition, JsonValue } from './dsl.js';
import { lookup, parsePath, resolveDeep, type ExpressionContext } from './expressions.js';

/** Structural equality of JSON values (object key order does not matter). */
export function jsonEqual(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, index) => {
      const other = b[index];
      return other !== undefined && jsonEqual(item, other);
    });
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const entries = Object.entries(a);
  return entries.length === Object.keys(b).length && entries.every(([key, value]) => {
    const other = Object.hasOwn(b, key) ? b[key] : undefined;
    return other !== undefined && jsonEqual(value, other);
  });
}

function ordered(left: JsonValue, right: JsonValue): number | undefined {
  if (typeof left === 'number' && typeof right === 'number') return left - right;
  if (typeof left === 'string' && typeof right === 'string') return left < right ? -1 : left > right ? 1 : 0;
  return undefined;
}

/** Whether `condition` holds; throws ExpressionError when an expression in a `value` leads nowhere. */
export function evaluateCondition(condition: Condition, context: ExpressionContext): boolean {
  if ('all' in condition) return condition.all.every((inner) => evaluateCondition(inner, context));
  if ('any' in condition) return condition.any.some((inner) => evaluateCondition(inner, context));
  if ('not' in condition) return !evaluateCondition(condition.not, context);
  const found = lookup(context, parsePath(condition.path));
  const value = condition.value === undefined ? null : resolveDeep(condition.value, context, 'value');
  if (condition.op === 'exists') return found.found;
  if (!found.found) return condition.op === 'ne';
  const actual = found.value;
  switch (condition.op) {
    case 'truthy':
      return actual !== null && actual !== false && actual !== 0 && actual !== '';
    case 'eq':
      return jsonEqual(actual, value);
    case 'ne':
      return !jsonEqual(actual, value);
    case 'in':
      return Array.isArray(value) && value.some((candidate) => jsonEqual(actual, candidate));
    default: {
      const order = ordered(actual, value);
      if (order === undefined) return false;
      return condition.op === 'gt' ? order > 0 : condition.op === 'gte' ? order >= 0 : condition.op === 'lt' ? order < 0 : order <= 0;
    }
  }
}
