import type { z } from 'zod';

/**
 * What a view of `T` can be made from: an object with every field `T` requires, where an
 * optional field may also be null (a record's empty column). Other fields are allowed and
 * left out of the view.
 */
export type ViewSource<T> = { [K in keyof T]: undefined extends T[K] ? T[K] | null : T[K] };

/** A response schema's fields in its order, each with whether it may be absent. */
type Plan = readonly (readonly [key: string, optional: boolean])[];

const plans = new WeakMap<z.ZodObject, Plan>();

function planOf(schema: z.ZodObject): Plan {
  let plan = plans.get(schema);
  if (!plan) {
    plan = Object.entries(schema.shape).map(([key, field]) => [key, (field as z.ZodType).safeParse(undefined).success] as const);
    plans.set(schema, plan);
  }
  return plan;
}

/**
 * The wire form of a record (or a backend's result): the fields the response schema declares,
 * in the schema's order, with an optional field left out where it is null or undefined. Field
 * names inside the program are the wire's, so nothing is renamed here; a field the view
 * derives (from the engine's state, from another record) is put on the source by the caller.
 * The field list is worked out once per schema, so a view costs a loop over its fields.
 */
export function view<S extends z.ZodObject>(schema: S, source: ViewSource<z.output<S>>): z.output<S> {
  const from = source as Record<string, unknown>;
  const body: Record<string, unknown> = {};
  for (const [key, optional] of planOf(schema)) {
    const value = from[key];
    if (optional && (value === null || value === undefined)) continue;
    body[key] = value;
  }
  return body as z.output<S>;
}
