import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve, dirname } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(import.meta.dirname, '../../src');

/** Which top-level folders of src/ each folder may import from (STYLE.md, rule 2). */
const ALLOWED: Record<string, string[]> = {
  cli: ['*'],
  http: ['services', 'schemas', 'backends', 'telemetry', 'errors.ts', 'paths.ts', 'images'],
  // MCP tools reach the services only through the HTTP routes (ApiClient), never around them.
  mcp: ['schemas', 'telemetry', 'errors.ts', 'paths.ts'],
  services: ['domain', 'backends', 'state', 'schemas', 'telemetry', 'errors.ts', 'paths.ts', 'images'],
  backends: ['domain', 'telemetry', 'errors.ts', 'paths.ts', 'images'],
  state: ['domain', 'errors.ts', 'paths.ts'],
  schemas: ['domain', 'errors.ts'],
  images: ['telemetry', 'errors.ts', 'paths.ts'],
  config: ['domain', 'errors.ts', 'paths.ts', 'images'],
  domain: [],
  telemetry: [],
};

function* files(dir: string): Generator<string> {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) yield* files(path);
    else if (path.endsWith('.ts')) yield path;
  }
}

describe('import boundaries', () => {
  it('keeps transport -> service -> backend one-way', () => {
    const violations: string[] = [];
    for (const file of files(SRC)) {
      const from = relative(SRC, file).split('/')[0]!;
      const allowed = ALLOWED[from];
      if (!allowed || allowed.includes('*')) continue;
      for (const match of readFileSync(file, 'utf8').matchAll(/from '(\.[^']+)'/g)) {
        const target = relative(SRC, resolve(dirname(file), match[1]!)).split('/')[0]!.replace(/\.js$/, '.ts');
        if (target !== from && !allowed.includes(target)) violations.push(`${relative(SRC, file)} imports ${match[1]}`);
      }
    }
    expect(violations).toEqual([]);
  });
});
