/**
 * The least work an instance of a definition will do, known before it starts: the static check
 * behind the start's 400 (docs/orchestrations.md, "Bounds"). It counts every step as reached
 * and run to completion, except what a `when` may skip (a container with a `when` counts as one
 * step, its children as none). A map's items count when they are known before the start: a
 * literal array, or one expression into the input alone (`${input.files}`); items that depend on
 * other steps or on a map's item count as none, and the bounds checked while the instance runs
 * catch what they make.
 */
import type { Definition, JsonValue, Step } from './dsl.js';
import { ExpressionError, resolveString, type ExpressionContext } from './expressions.js';

export interface LeastWork {
  /** Steps reached, containers and map items included. */
  steps: number;
  /** History events: the start and the end, and three per activity (scheduled, started, completed). */
  historyEvents: number;
}

/** What `definition` will do at least for `input`; see the file header. */
export function leastWork(definition: Definition, input: JsonValue): LeastWork {
  const context: ExpressionContext = { input, orchestration: { id: '', name: definition.name }, steps: new Map() };
  const tally = { steps: 0, activities: 0 };
  // Each entry: a list of steps and how many times it runs. An explicit stack: no recursion.
  const stack: { steps: Step[]; times: number }[] = [{ steps: definition.steps, times: 1 }];
  while (stack.length > 0) {
    const { steps, times } = stack.pop() as { steps: Step[]; times: number };
    for (const step of steps) {
      tally.steps += times;
      if (step.when) continue;
      if (step.type === 'activity') tally.activities += times;
      else if (step.type === 'parallel') for (const branch of Object.values(step.branches)) stack.push({ steps: branch, times });
      else if (step.type === 'map') {
        const items = knownItems(step.items, context);
        const inner = { ...step.step, id: step.step.id ?? step.id } as Step;
        if (items > 0) stack.push({ steps: [inner], times: times * items });
      }
    }
  }
  return { steps: tally.steps, historyEvents: 2 + 3 * tally.activities };
}

/** How many items a map has before the start; 0 when it is known only at run time. */
function knownItems(items: string | JsonValue[], context: ExpressionContext): number {
  if (Array.isArray(items)) return items.length;
  try {
    const resolved = resolveString(items, context);
    return Array.isArray(resolved) ? resolved.length : 0;
  } catch (err) {
    if (err instanceof ExpressionError) return 0;
    throw err;
  }
}
