import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeHarness } from '../../helpers/fake-app.js';

/** openapi-typescript and TypeScript of the dashboard's package (web/), kept out of the server's dependencies. */
const WEB_BIN = resolve(import.meta.dirname, '../../../web/node_modules/.bin');
const run = promisify(execFile);

/**
 * A small client over fetch, typed only by what openapi-typescript generated from the served
 * document: paths, bodies and replies come from `operations[operationId]`.
 */
const CLIENT = `
import type { operations } from './api';
type Body<O extends keyof operations> = operations[O] extends { requestBody: { content: { 'application/json': infer B } } } ? B : undefined;
type Reply<O extends keyof operations, S extends keyof operations[O]['responses']> =
  operations[O]['responses'][S] extends { content: { 'application/json': infer R } } ? R : never;
export async function call<O extends keyof operations, S extends keyof operations[O]['responses']>(
  _operation: O, _status: S, method: string, path: string, body: Body<O>,
): Promise<Reply<O, S>> {
  const response = await fetch('http://127.0.0.1:18888' + path, { method, body: body === undefined ? undefined : JSON.stringify(body) });
  return (await response.json()) as Reply<O, S>;
}
`;

const GOOD = `
import { call } from './client';
export async function demo(): Promise<string> {
  const created = await call('createSandbox', 201, 'POST', '/sandboxes', { name: 'demo', image: 'sandboxd/base:bookworm', labels: { team: 'ml' } });
  const name: string = created.data.name;
  const status: 'creating' | 'running' | 'stopped' | string = created.data.status;
  const exec = await call('execCommand', 200, 'POST', \`/sandboxes/\${name}/exec\`, { command: ['echo', 'hi'], timeout_ms: 5000 });
  const code: number = exec.data.exit_code;
  const out: string = exec.data.stdout;
  const removed = await call('deleteSandbox', 200, 'DELETE', \`/sandboxes/\${name}\`, undefined);
  return \`\${status} \${code} \${out} \${removed.success}\`;
}
`;

/** Mistakes the generated types must catch: a string command, a field that does not exist, a missing name. */
const BAD = {
  stringCommand: `import { call } from './client';\nvoid call('execCommand', 200, 'POST', '/sandboxes/x/exec', { command: 'echo hi' });\n`,
  unknownField: `import { call } from './client';\nexport const f = async () => (await call('execCommand', 200, 'POST', '/sandboxes/x/exec', { command: ['true'] })).data.exitCode;\n`,
  missingName: `import { call } from './client';\nvoid call('createSandbox', 201, 'POST', '/sandboxes', { image: 'x' });\n`,
};

let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sandboxd-openapi-client-'));
  const h = await fakeHarness();
  writeFileSync(join(dir, 'openapi.json'), (await h.app.inject({ url: '/openapi.json' })).body);
  await h.close();
  await run(join(WEB_BIN, 'openapi-typescript'), [join(dir, 'openapi.json'), '--output', join(dir, 'api.d.ts')]);
  writeFileSync(join(dir, 'client.ts'), CLIENT);
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** tsc over one script and the generated client: its diagnostics, '' when it type-checks. */
async function typecheck(file: string, source: string): Promise<string> {
  writeFileSync(join(dir, file), source);
  const args = ['--noEmit', '--strict', '--target', 'ES2022', '--module', 'ESNext', '--moduleResolution', 'Bundler', '--lib', 'ES2022,DOM', join(dir, file)];
  try {
    await run(join(WEB_BIN, 'tsc'), args, { cwd: dir });
    return '';
  } catch (err) {
    return String((err as { stdout?: string }).stdout ?? err);
  }
}

describe('a client generated from the OpenAPI document (openapi-typescript)', () => {
  it('type-checks a script that creates a sandbox, runs a command in it and removes it', async () => {
    expect(await typecheck('good.ts', GOOD)).toBe('');
  }, 60_000);

  it.each(Object.entries(BAD))('refuses a script with a mistake: %s', async (name, source) => {
    expect(await typecheck(`${name}.ts`, source)).toMatch(new RegExp(String.raw`${name}\.ts\(\d+,\d+\): error TS\d+`));
  }, 60_000);
});
