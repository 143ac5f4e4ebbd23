import { existsSync, readdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const UNIT = join(ROOT, 'test/unit');

/** Every folder under `dir`, itself included. */
function folders(dir: string): string[] {
  return [dir, ...readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).flatMap((e) => folders(join(dir, e.name)))];
}

describe('test/unit/ mirrors src/', () => {
  it('has a folder only where src/ has the same one', () => {
    const strays = folders(UNIT)
      .map((dir) => relative(UNIT, dir))
      .filter((dir) => dir !== '' && !existsSync(join(ROOT, 'src', dir)));
    expect(strays).toEqual([]);
  });

  it('keeps at its top only the checks of the whole repository and the tests of src/ top-level files', () => {
    const top = readdirSync(UNIT).filter((name) => name.endsWith('.test.ts'));
    const ofSrcFiles = top.filter((name) => existsSync(join(ROOT, 'src', name.replace('.test.ts', '.ts'))));
    const repositoryChecks = ['boundaries', 'config-sections', 'deploy', 'docs', 'non-null-assertions', 'setup-link', 'setup-plan', 'setup-storage', 'test-layout', 'web-api-types'];
    expect(top.filter((name) => !ofSrcFiles.includes(name)).map((name) => name.replace('.test.ts', '')).sort()).toEqual(repositoryChecks.sort());
  });
});
