import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  definitionSchema,
  isDefinition,
  stepSchema,
  validateDefinition,
  type Condition,
  type Definition,
  type MapStep,
  type ParallelStep,
  type Step,
} from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { present, ServiceError } from '../../../../../../src/errors.js';

const echo = (id: string) => ({ id, type: 'activity', run: { command: ['echo', id] } });

describe('the DSL schemas (interpreter/dsl.ts)', () => {
  it('infer the recursive types themselves (no any, a map item without an id)', () => {
    expectTypeOf<ParallelStep['branches']>().toEqualTypeOf<Record<string, Step[]>>();
    expectTypeOf<MapStep['step']['id']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<Step['id']>().toEqualTypeOf<string>();
    expectTypeOf<Extract<Condition, { not: unknown }>['not']>().toEqualTypeOf<Condition>();
    expectTypeOf<Definition['steps']>().toEqualTypeOf<Step[]>();
  });

  it('accept nested parallels, maps and conditions, and refuse a listed step without an id', () => {
    const definition = {
      name: 'nested',
      steps: [
        echo('list'),
        {
          id: 'checks',
          type: 'parallel',
          when: { all: [{ path: 'steps.list.output', op: 'truthy' }, { not: { path: 'input.skip', op: 'exists' } }] },
          branches: { lint: [echo('lint')], test: [{ id: 'each', type: 'map', items: ['a', 'b'], step: { type: 'set', value: '${item}' } }] },
        },
      ],
    };
    expect(isDefinition(definition)).toBe(true);
    expect(validateDefinition(definition)).toEqual(definition);
    expect(stepSchema.safeParse({ type: 'set', value: 1 }).success).toBe(false);
    expect(definitionSchema.safeParse({ name: 'x', steps: [{ id: 'p', type: 'parallel', branches: { b: [{ type: 'set', value: 1 }] } }] }).success).toBe(false);
  });

  it('return the validated definition itself, key order kept, the read-only fields of a GET left out', () => {
    const raw = { steps: [{ value: 1, type: 'set', id: 'a' }], name: 'kept', version: 3, created_at: 'x', updated_at: 'y' };
    const definition = validateDefinition(raw);
    expect(Object.keys(definition)).toEqual(['steps', 'name']);
    expect(definition.steps[0]).toBe(raw.steps[0]);
  });
});

describe('present (src/errors.ts)', () => {
  it('returns a present value, and throws INTERNAL naming what is missing otherwise', () => {
    expect(present(0, 'zero')).toBe(0);
    expect(present('', 'empty text')).toBe('');
    for (const missing of [undefined, null]) {
      const thrown = (() => {
        try {
          present(missing, 'the timer of wait');
        } catch (err) {
          return err;
        }
      })();
      expect(thrown).toBeInstanceOf(ServiceError);
      expect(thrown).toMatchObject({ code: 'INTERNAL', message: 'the timer of wait is missing' });
    }
  });
});
