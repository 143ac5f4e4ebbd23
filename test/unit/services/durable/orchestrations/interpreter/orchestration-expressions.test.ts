import { describe, expect, it } from 'vitest';
import {
  evaluateCondition,
  ExpressionError,
  jsonEqual,
  parsePath,
  parseTemplate,
  resolveDeep,
  resolveString,
  type ExpressionContext,
} from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';

const context: ExpressionContext = {
  input: { name: 'ann', n: 3, list: [{ id: 'x' }, { id: 'y' }], flag: false, nothing: null, obj: { b: 2, a: 1 } },
  orchestration: { id: 'inst-1', name: 'demo' },
  steps: new Map([
    ['build', { output: { files: ['a', 'b'] }, exit_code: 0, stderr: 'warn', status: 'completed' as const }],
    ['skipped', { output: null, exit_code: null, stderr: null, status: 'skipped' as const }],
  ]),
  map: { item: { path: '/x' }, index: 2 },
};

describe('expressions: parsing', () => {
  it('splits literals and paths; $${ is a literal ${', () => {
    expect(parseTemplate('a ${input.x} b $${HOME} ${item}')).toEqual([
      { literal: 'a ' },
      { path: { text: 'input.x', segments: ['input', 'x'] } },
      { literal: ' b ${HOME} ' },
      { path: { text: 'item', segments: ['item'] } },
    ]);
    expect(parseTemplate('')).toEqual([{ literal: '' }]);
  });

  it('paths take .name, [n] and spaces around', () => {
    expect(parsePath(' steps.build.output.files[1] ').segments).toEqual(['steps', 'build', 'output', 'files', 1]);
    expect(parsePath('input.my-key.0').segments).toEqual(['input', 'my-key', '0']);
  });

  it.each([
    ['', 'an empty path'],
    ['input.', "'input.' is not a valid path: names are letters, digits, '_' and '-'"],
    ['input[x]', "'input[x]' is not a valid path: [...] takes an array index"],
    ['input x', "'input x' is not a valid path: names are letters, digits, '_' and '-'"],
    ['input(1)', "'input(1)' is not a valid path: names are letters, digits, '_' and '-'"],
  ])('refuses %j', (text, message) => {
    expect(() => parsePath(text)).toThrow(new ExpressionError(message));
  });
});

describe('expressions: resolution', () => {
  it('exactly one ${...} yields the raw JSON value', () => {
    expect(resolveString('${input.n}', context)).toBe(3);
    expect(resolveString('${input.list}', context)).toEqual([{ id: 'x' }, { id: 'y' }]);
    expect(resolveString('${input.nothing}', context)).toBeNull();
    expect(resolveString('${steps.build.output.files[1]}', context)).toBe('b');
    expect(resolveString('${steps.build.exit_code}', context)).toBe(0);
    expect(resolveString('${steps.skipped.status}', context)).toBe('skipped');
    expect(resolveString('${item.path}', context)).toBe('/x');
    expect(resolveString('${index}', context)).toBe(2);
    expect(resolveString('${orchestration.name}', context)).toBe('demo');
  });

  it('anything else interpolates, non-strings as JSON', () => {
    expect(resolveString('n=${input.n} list=${input.list} f=${input.flag} z=${input.nothing} s=${input.name}', context)).toBe(
      'n=3 list=[{"id":"x"},{"id":"y"}] f=false z=null s=ann',
    );
    expect(resolveString(' ${input.n}', context)).toBe(' 3');
    expect(resolveString('plain', context)).toBe('plain');
  });

  it('resolves deep inside objects and arrays, keys as written', () => {
    expect(resolveDeep({ '${input.name}': ['${input.n}', { deep: '${index}-${item.path}' }], n: 1, t: true, z: null }, context)).toEqual({
      '${input.name}': [3, { deep: '2-/x' }],
      n: 1,
      t: true,
      z: null,
    });
  });

  it.each([
    ['${input.missing}', "${input.missing} leads nowhere: input has no field 'missing'"],
    ['${input.list[5]}', '${input.list[5]} leads nowhere: input.list has 2 items, no index 5'],
    ['${input.n.x}', "${input.n.x} leads nowhere: input.n is a number, it has no field 'x'"],
    ['${input.nothing.x}', "${input.nothing.x} leads nowhere: input.nothing is null, it has no field 'x'"],
    ['${steps.skipped.output.x}', "${steps.skipped.output.x} leads nowhere: steps.skipped.output is null, it has no field 'x'"],
    ['${steps.other.output}', "${steps.other.output} leads nowhere: step 'other' has not run here"],
    ['x ${input.obj.c} y', "${input.obj.c} leads nowhere: input.obj has no field 'c'"],
  ])('a path into nowhere is an error: %s', (text, message) => {
    expect(() => resolveString(text, context)).toThrow(new ExpressionError(message));
  });

  it('item and index do not exist outside a map', () => {
    expect(() => resolveString('${item}', { ...context, map: undefined })).toThrow("${item} leads nowhere: 'item' exists only inside a map");
  });

  it('names where a failed resolution sits', () => {
    expect(() => resolveDeep({ run: { command: ['echo', '${input.nope}'] } }, context)).toThrow("run.command[1]: ${input.nope} leads nowhere: input has no field 'nope'");
  });
});

describe('conditions', () => {
  const holds = (condition: object) => evaluateCondition(condition as never, context);

  it.each([
    [{ path: 'input.n', op: 'eq', value: 3 }, true],
    [{ path: 'input.obj', op: 'eq', value: { a: 1, b: 2 } }, true],
    [{ path: 'input.n', op: 'ne', value: 3 }, false],
    [{ path: 'input.n', op: 'gt', value: 2 }, true],
    [{ path: 'input.n', op: 'gte', value: 3 }, true],
    [{ path: 'input.n', op: 'lt', value: 3 }, false],
    [{ path: 'input.n', op: 'lte', value: 3 }, true],
    [{ path: 'input.name', op: 'gt', value: 'abc' }, true],
    [{ path: 'input.n', op: 'gt', value: '2' }, false],
    [{ path: 'input.name', op: 'in', value: ['bob', 'ann'] }, true],
    [{ path: 'input.name', op: 'in', value: 'ann' }, false],
    [{ path: 'input.nothing', op: 'exists' }, true],
    [{ path: 'input.missing', op: 'exists' }, false],
    [{ path: 'input.flag', op: 'truthy' }, false],
    [{ path: 'input.list', op: 'truthy' }, true],
    [{ path: 'input.missing', op: 'eq', value: null }, false],
    [{ path: 'input.missing', op: 'ne', value: null }, true],
    [{ path: 'input.missing', op: 'truthy' }, false],
    [{ path: 'steps.build.output.files[0]', op: 'eq', value: '${input.list[0].id}' }, false],
    [{ path: 'steps.build.output.files[0]', op: 'eq', value: 'a' }, true],
    [{ path: 'item.path', op: 'eq', value: '/x' }, true],
    [{ all: [{ path: 'input.n', op: 'eq', value: 3 }, { not: { path: 'input.flag', op: 'truthy' } }] }, true],
    [{ any: [{ path: 'input.n', op: 'eq', value: 4 }, { path: 'input.missing', op: 'exists' }] }, false],
  ])('%j is %s', (condition, expected) => {
    expect(holds(condition)).toBe(expected);
  });

  it('an expression in a value that leads nowhere is an error', () => {
    expect(() => holds({ path: 'input.n', op: 'eq', value: '${input.nope}' })).toThrow("value: ${input.nope} leads nowhere: input has no field 'nope'");
  });

  it('jsonEqual ignores key order and tells arrays from objects', () => {
    expect(jsonEqual({ a: [1, { b: 2 }] }, { a: [1, { b: 2 }] })).toBe(true);
    expect(jsonEqual([1], { 0: 1 })).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(jsonEqual(null, {})).toBe(false);
  });
});
