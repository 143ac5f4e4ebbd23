import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { fakeHarness } from '../helpers/fake-app.js';

const ROOT = resolve(import.meta.dirname, '../..');
/** openapi-typescript belongs to the dashboard's package (web/), kept out of the server's dependencies. */
const OPENAPI_TYPESCRIPT = join(ROOT, 'web/node_modules/.bin/openapi-typescript');
/** The dashboard's API types, committed: `npm run gen:types` rewrites them (this test with `-u`). */
const GENERATED = join(ROOT, 'web/src/generated/api.ts');

/** What openapi-typescript makes of the document the app serves at /openapi.json (fake backend, no key). */
async function generatedTypes(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-web-types-'));
  try {
    const h = await fakeHarness();
    try {
      writeFileSync(join(dir, 'openapi.json'), (await h.app.inject({ url: '/openapi.json' })).body);
    } finally {
      await h.close();
    }
    // A field with a default stays optional: a request body may leave it out (the server fills it in).
    const options = ['--default-non-nullable', 'false'];
    await promisify(execFile)(OPENAPI_TYPESCRIPT, [join(dir, 'openapi.json'), ...options, '--output', join(dir, 'api.ts')]);
    return readFileSync(join(dir, 'api.ts'), 'utf8');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the dashboard's API types (web/src/generated/api.ts)", () => {
  it('are what openapi-typescript generates from the served OpenAPI document (stale: run `npm run gen:types`)', async () => {
    // Checked before the comparison, which would write a missing file and pass.
    const committed = existsSync(GENERATED);
    await expect(await generatedTypes()).toMatchFileSnapshot(GENERATED);
    expect(committed, 'web/src/generated/api.ts is committed (`npm run gen:types` writes it)').toBe(true);
  }, 60_000);
});
