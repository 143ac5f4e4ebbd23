/**
 * Definition-time checks of the paths an expression or a condition uses: every path must go
 * somewhere the data of an instance will have. Visibility: a step sees the steps before it in
 * its list and everything its enclosing lists see (a parallel branch: the steps before the
 * parallel plus the earlier steps of its own branch; a map's step: the steps before the map,
 * plus `item` and `index`). Steps inside a parallel or a map are not visible after it: use the
 * container's output (`steps.checks.output.lint`).
 */
import type { StepType } from './dsl.js';
import { ExpressionError, expressionsIn, parsePath, type ExpressionPath } from './expressions.js';

/** What the code at one place of a definition may refer to. */
export interface Scope {
  /** Step ids visible here, with their types. */
  visible: ReadonlyMap<string, StepType>;
  /** Inside a map's step: `item` and `index` exist. */
  inMap: boolean;
  /** Every step id anywhere in the definition (to tell "later" from "unknown"). */
  allIds: ReadonlySet<string>;
}

const STEP_FIELDS = ['output', 'exit_code', 'stderr', 'status'];

/** Why `path` leads nowhere from `scope`, or undefined when it is fine. */
export function pathProblem(path: ExpressionPath, scope: Scope): string | undefined {
  const [root, ...rest] = path.segments;
  switch (root) {
    case 'input':
      return undefined;
    case 'orchestration':
      if (rest.length !== 1 || (rest[0] !== 'id' && rest[0] !== 'name')) return `'${path.text}': orchestration offers only id and name`;
      return undefined;
    case 'item':
    case 'index':
      if (!scope.inMap) return `'${path.text}': ${root} exists only inside a map's step`;
      if (root === 'index' && rest.length > 0) return `'${path.text}': index is a number, it has no fields`;
      return undefined;
    case 'steps': {
      const [id, field, ...deeper] = rest;
      if (typeof id !== 'string') return `'${path.text}': steps needs a step id (steps.<id>.output)`;
      const type = scope.visible.get(id);
      if (!type) return scope.allIds.has(id) ? `refers to step '${id}' which is not before this step` : `refers to unknown step '${id}'`;
      if (typeof field !== 'string' || !STEP_FIELDS.includes(field)) {
        return `'${path.text}': a step offers ${STEP_FIELDS.join(', ')}`;
      }
      if ((field === 'exit_code' || field === 'stderr') && type !== 'activity') {
        return `'${path.text}': step '${id}' is a ${type}; only activities have ${field}`;
      }
      if (field !== 'output' && deeper.length > 0) return `'${path.text}': ${field} has no fields`;
      return undefined;
    }
    default:
      return `'${path.text}': unknown root '${String(root)}' (input, steps, item, index, orchestration)`;
  }
}

/** Problems (`<where>: <why>`) of every expression inside `value`, which sits at `where`. */
export function expressionProblems(value: unknown, where: string, scope: Scope): string[] {
  return expressionsIn(value, where).flatMap((found) => {
    const problem = 'error' in found ? found.error : pathProblem(found.path, scope);
    return problem ? [`${found.where}: ${problem}`] : [];
  });
}

/** Problems of a condition's bare `path` (no `${}`). */
export function conditionPathProblems(text: string, where: string, scope: Scope): string[] {
  let path;
  try {
    path = parsePath(text);
  } catch (err) {
    if (err instanceof ExpressionError) return [`${where}: ${err.message}`];
    throw err;
  }
  const problem = pathProblem(path, scope);
  return problem ? [`${where}: ${problem}`] : [];
}
