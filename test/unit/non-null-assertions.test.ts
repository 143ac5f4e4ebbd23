import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain ES module script without type declarations
import { BUDGET, nonNullAssertions } from '../../scripts/check-non-null.mjs';

describe('non-null assertions (scripts/check-non-null.mjs)', () => {
  it(`finds at most the budget (${BUDGET as number}) in src/`, () => {
    const found = nonNullAssertions() as string[];
    expect(found.length, `non-null assertions in src/:\n${found.join('\n')}`).toBeLessThanOrEqual(BUDGET as number);
  });

  it('counts assertions, not negations, inequalities or definite fields', () => {
    const tree = mkdtempSync(join(tmpdir(), 'sandboxd-non-null-'));
    try {
      mkdirSync(join(tree, 'src/nested'), { recursive: true });
      writeFileSync(
        join(tree, 'src/nested/a.ts'),
        [
          'const list: number[] = [1];',
          'export const first = list[0]!;',
          'export const twice = list.at(0)! + list.at(-1)!;',
          'export const not = !first && first !== 2;',
          'export class C { field!: string; }',
          '',
        ].join('\n'),
      );
      writeFileSync(join(tree, 'src/b.ts'), 'export const none = 1 != 2;\n');
      expect(nonNullAssertions(tree)).toEqual(['src/nested/a.ts:2', 'src/nested/a.ts:3', 'src/nested/a.ts:3']);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  });
});
