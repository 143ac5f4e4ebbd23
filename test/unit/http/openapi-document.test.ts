import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { operationIdFor, tidyDocument } from '../../../src/http/openapi-document.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

type Doc = {
  servers?: { url: string }[];
  paths: Record<string, Record<string, { operationId?: string }>>;
  components: { schemas: Record<string, unknown> };
};

let h: FakeHarness;
let doc: Doc;
beforeAll(async () => {
  h = await fakeHarness();
  doc = (await h.app.inject({ url: '/openapi.json' })).json();
});
afterAll(async () => h?.close());

const operations = () => Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ where: `${method} ${path}`, id: op.operationId })));

describe('the served OpenAPI document', () => {
  it('gives every operation a unique camelCase operationId', () => {
    const ops = operations();
    expect(ops.length).toBeGreaterThan(70);
    for (const { where, id } of ops) expect(id, where).toMatch(/^[a-z][A-Za-z0-9]*$/);
    const ids = ops.map((o) => o.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('names the operations a client calls most as a person would', () => {
    const id = (method: string, path: string) => doc.paths[path]?.[method]?.operationId;
    expect(id('post', '/sandboxes')).toBe('createSandbox');
    expect(id('get', '/sandboxes')).toBe('listSandboxes');
    expect(id('get', '/sandboxes/{name}')).toBe('getSandbox');
    expect(id('delete', '/sandboxes/{name}')).toBe('deleteSandbox');
    expect(id('post', '/sandboxes/{name}/exec')).toBe('execCommand');
    expect(id('put', '/sandboxes/{name}/files/{path}')).toBe('writeFile');
    expect(id('get', '/sandboxes/{name}/files/{path}')).toBe('readFile');
    expect(id('post', '/stores/{id}/query')).toBe('queryStore');
    expect(id('get', '/schedules/{id}/runs')).toBe('listScheduleRuns');
  });

  it('has no XInput component beside an X, and every $ref resolves', () => {
    const names = Object.keys(doc.components.schemas);
    const pairs = names.filter((n) => n.endsWith('Input') && names.includes(n.slice(0, -5)));
    expect(pairs).toEqual([]);
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of new Set(refs)) expect(names, ref).toContain(ref);
  });

  it('names a server', () => {
    expect(doc.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });
});

describe('operationIdFor', () => {
  it.each([
    ['GET', '/sandboxes', 'listSandboxes'],
    ['POST', '/sandboxes', 'createSandbox'],
    ['GET', '/sandboxes/:name', 'getSandbox'],
    ['PATCH', '/sandboxes/:name', 'updateSandbox'],
    ['POST', '/sandboxes/:name/start', 'startSandbox'],
    ['GET', '/sandboxes/:name/logs', 'getSandboxLogs'],
    ['POST', '/snapshots/:name/restore', 'restoreSnapshot'],
    ['GET', '/policy/status', 'getPolicyStatus'],
    ['POST', '/llm-keys', 'postLlmKeys'],
    ['POST', '/orchestrations/:id/raise-event', 'raiseEventOrchestration'],
    ['POST', '/sandboxes/:name/exec', 'execCommand'],
  ])('%s %s -> %s', (method, url, id) => {
    expect(operationIdFor(method, url)).toBe(id);
  });
});

describe('tidyDocument', () => {
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  const object = (extra: object = {}) => ({ type: 'object', properties: { a: { type: 'string' } }, required: ['a'], ...extra });
  const document = (schemas: Record<string, unknown>, paths: Doc['paths'] = { '/x': { get: { operationId: 'getX' } } }) => ({ paths, components: { schemas } });

  it('merges a pair that differs only in additionalProperties, rewriting the refs to it', () => {
    const tidy = tidyDocument(
      document({
        ThingInput: object(),
        Thing: object({ additionalProperties: false }),
        Holder: { type: 'object', properties: { thing: ref('ThingInput') } },
        Other: { type: 'object', properties: { thing: ref('Thing') } },
      }),
    );
    expect(Object.keys(tidy.components.schemas).sort()).toEqual(['Holder', 'Other', 'Thing']);
    expect(tidy.components.schemas.Thing).toEqual({ ...object(), $id: '#/components/schemas/Thing' });
    expect(JSON.stringify(tidy)).not.toContain('ThingInput');
  });

  it('merges a pair whose members refer to a merged pair', () => {
    const tidy = tidyDocument(
      document({
        InnerInput: object(),
        Inner: object({ additionalProperties: false }),
        OuterInput: { type: 'object', properties: { inner: ref('InnerInput') } },
        Outer: { type: 'object', properties: { inner: ref('Inner') }, additionalProperties: false },
        Use: { type: 'array', items: ref('Outer') },
      }),
    );
    expect(Object.keys(tidy.components.schemas).sort()).toEqual(['Inner', 'Outer', 'Use']);
  });

  it('keeps a pair that really differs while both are used', () => {
    const schemas = {
      PageInput: { type: 'object', properties: { size: { type: 'integer', default: 10 } } },
      Page: { type: 'object', properties: { size: { type: 'integer', default: 10 } }, required: ['size'] },
      A: ref('PageInput'),
      B: ref('Page'),
    };
    expect(Object.keys(tidyDocument(document(schemas)).components.schemas).sort()).toEqual(['A', 'B', 'Page', 'PageInput']);
  });

  it('drops the written form of a pair that nothing refers to', () => {
    const schemas = {
      QueryInput: { type: 'object', properties: { max: { type: 'integer' } } },
      Query: { type: 'object', properties: { max: { type: 'integer' } }, required: ['max'] },
      Body: ref('QueryInput'),
    };
    const tidy = tidyDocument(document(schemas));
    expect(Object.keys(tidy.components.schemas).sort()).toEqual(['Body', 'Query']);
    expect(tidy.components.schemas.Body).toEqual(ref('Query'));
  });

  it('refuses an operation without an operationId, and a duplicate one', () => {
    expect(() => tidyDocument(document({}, { '/x': { get: {} } }))).toThrow('OpenAPI: GET /x has no operationId');
    expect(() => tidyDocument(document({}, { '/x': { get: { operationId: 'same' } }, '/y': { post: { operationId: 'same' } } }))).toThrow(
      'OpenAPI: operationId same of POST /y is also that of GET /x',
    );
  });
});
