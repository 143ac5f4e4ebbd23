import fc from 'fast-check';

/**
 * Generators of HTTP requests for every route of an OpenAPI document: the routes, their path
 * parameters, query parameters and JSON bodies come from /openapi.json, so a new route is fuzzed
 * without a change here. Values are valid (drawn from the schema and from pools of values that
 * name things that exist), at a boundary, or malicious (control characters, lone surrogates,
 * huge numbers, wrong types, path traversal, odd image references, URLs...).
 */

type JsonSchema = {
  $ref?: string;
  type?: string | string[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  enum?: unknown[];
  const?: unknown;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  format?: string;
  content?: Record<string, { schema?: JsonSchema }>;
};

type Parameter = { in: string; name: string; schema?: JsonSchema };
type Operation = { parameters?: Parameter[]; requestBody?: { content?: Record<string, { schema?: JsonSchema }> } };
export type OpenApiDocument = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, JsonSchema> } };

/** One generated request. */
export interface FuzzRequest {
  method: string;
  /** The route template, for messages. */
  route: string;
  /** The path with its parameters filled in, already encoded (or deliberately not). */
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
}

/** Names of things the fuzz run keeps in existence, so that requests reach the services. */
export interface KnownNames {
  sandboxes: string[];
  snapshots: string[];
  /** Images that exist (others could be pulled from a registry: slow, and not the point). */
  images: string[];
}

/** Strings that have broken servers: control characters, encodings, traversal, injection. */
export const MALICIOUS_STRINGS = [
  '',
  ' ',
  '\0',
  'a\0b',
  '%00',
  '\n',
  '\r\n',
  '\x1b[31m',
  '\x7f',
  '\ud800',
  'x\udfffy',
  '\u202e\u202d',
  '\ufeff',
  '"',
  "'",
  '`',
  '\\',
  '${IFS}',
  '$(id)',
  '; rm -rf /',
  '../../etc/passwd',
  '..',
  '.',
  '/',
  '//',
  '%2e%2e%2f',
  '..%2F127.0.0.1:1%2Fx',
  '../127.0.0.1:1/x',
  'http://evil/x',
  'http://127.0.0.1:1/',
  'file:///etc/passwd',
  '--upload-pack=touch /tmp/x',
  '-rf',
  'nonexistent/image:nope',
  'UPPER/Case',
  'a'.repeat(64),
  'a'.repeat(256),
  'a'.repeat(5000),
  '😀',
  'ａ',
  '<script>alert(1)</script>',
  '{"a":1}',
  'null',
  'true',
  '1e309',
  '-0',
  'NaN',
  '__proto__',
  'constructor',
];

/** Numbers at and past every boundary a field may have. */
export const ODD_NUMBERS = [0, -1, 1, 2, 31, 32, 100, 255, 256, 4096, 65535, 65536, 2 ** 31, 2 ** 31 - 1, 2 ** 32, 2 ** 53, -(2 ** 53), 1e21, 1e308, -1e308, 0.5, 1.5, -0.0001, 86_400_000, 86_400_001];

const WRONG_TYPES: unknown[] = [null, true, false, 0, -1, 1.5, '', 'x', [], [1], ['x'], {}, { a: 1 }, [[[]]], { __proto__: { polluted: true } }];

/** Plausible values by field name: enough of them valid that requests get past validation. */
function poolFor(field: string, known: KnownNames): unknown[] {
  switch (field) {
    case 'name':
    case 'sandbox':
    case 'as_name':
      return [...known.sandboxes, ...known.snapshots, 'fz-new', 'fz-other', 'no-such-sandbox'];
    case 'image':
      return [...known.images, 'UPPER/case', '../127.0.0.1:1/x', 'a b', `x:${'t'.repeat(129)}`];
    case 'command':
      return [['true'], ['echo', 'hi'], ['sh', '-c', 'echo out; echo err >&2; exit 3'], ['false'], ['no-such-program'], ['cat']];
    case 'path':
      return ['workspace/a.txt', 'workspace/dir/b.bin', 'tmp/x', 'etc/hostname', 'dev/full', 'proc/self/environ', 'workspace', `workspace/${'n'.repeat(256)}`];
    case 'files':
      return [{ 'a.txt': 'x' }, { '/workspace/b': 'y', 'c/d': 'z' }, { '../x': 'y' }, {}];
    case 'ttl':
    case 'by':
      return ['30s', '1h', '2d', '365d', '366d', '99999999d', '0s', '1y', '-1h'];
    case 'profile':
      return ['moderate', 'restrictive', 'permissive', 'root'];
    case 'source_url':
      return ['https://example.com/repo.git', 'http://127.0.0.1:1/x.git', 'git@github.com:x/y.git', 'file:///etc', 'ssh://-oProxyCommand=x/y'];
    case 'url':
      return ['about:blank', 'http://127.0.0.1:1/', 'javascript:alert(1)', 'file:///etc/passwd'];
    case 'encoding':
      return ['utf8', 'base64', 'latin1'];
    case 'content':
      return ['hello', 'aGVsbG8=', '', '\0\x01'];
    case 'uuid':
      return ['00000000-0000-0000-0000-000000000000', '0190b7c4-5b7e-7000-8000-000000000000', 'not-a-uuid'];
    case 'timeout_ms':
      return [1, 100, 2000, 0, -5, 86_400_001];
    case 'id':
      return ['d-1', 'nope', '../x'];
    case 'page':
      return ['main', 'p2', 'a b'];
    case 'cron':
      // Nothing more often than every 10 s: on Docker each firing of a run target is a container.
      return ['* * * * *', '*/10 * * * * *', '*/5 * * * *', '@hourly', '@reboot', '0 0 30 2 *', '0 0 1 1 * 2030', '61 * * * *', 'L W # ?', '0 12 1 * +MON'];
    case 'fire_at':
    case 'end_at':
      return [new Date(Date.now() + 3_600_000).toISOString(), '2020-01-01T00:00:00Z', '2026-02-30T00:00:00Z', 'tomorrow', '9999-12-31T23:59:59+14:00'];
    case 'timezone':
      return ['UTC', 'Europe/Berlin', 'America/New_York', 'Mars/Olympus', '+01:00', 'utc'];
    case 'method':
      return ['run', 'exec', 'start', 'increment', '_private'];
    case 'target_sandbox':
      return [...known.sandboxes, 'no-such-sandbox'];
    case 'args':
      return [{ command: ['true'] }, { command: ['echo', 'hi'], timeout_ms: 1000 }, {}, { cmd: 'x' }, { command: ['id'], sudo: true }];
    default:
      return [];
  }
}

/** The schema a `$ref` points to, resolved through the document's components. */
function resolve(schema: JsonSchema | undefined, doc: OpenApiDocument): JsonSchema {
  let current = schema ?? {};
  for (let depth = 0; current.$ref && depth < 10; depth++) {
    const id = current.$ref.split('/').pop()!;
    current = doc.components?.schemas?.[id] ?? {};
  }
  return current;
}

const string = (schema: JsonSchema): fc.Arbitrary<string> =>
  schema.enum
    ? fc.constantFrom(...(schema.enum as string[]))
    : fc.string({ minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 24, 24) });

/** Values that fit the schema (as far as its shape goes). */
function valid(schema: JsonSchema | undefined, doc: OpenApiDocument, known: KnownNames, field: string, depth: number): fc.Arbitrary<unknown> {
  const s = resolve(schema, doc);
  const pool = poolFor(field, known);
  const fromSchema = shaped(s, doc, known, field, depth);
  return pool.length > 0 ? fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...pool) }, { weight: 1, arbitrary: fromSchema }) : fromSchema;
}

function shaped(s: JsonSchema, doc: OpenApiDocument, known: KnownNames, field: string, depth: number): fc.Arbitrary<unknown> {
  if (s.const !== undefined) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...s.enum);
  const branches = s.anyOf ?? s.oneOf;
  if (branches?.length) return fc.oneof(...branches.map((branch) => valid(branch, doc, known, field, depth)));
  if (s.allOf?.length) return valid(s.allOf[0], doc, known, field, depth);
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string':
      return string(s);
    case 'integer':
      return fc.integer({ min: s.minimum ?? -1000, max: Math.min(s.maximum ?? 100_000, 100_000) });
    case 'number':
      return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return depth > 3 ? fc.constant([]) : fc.array(valid(s.items, doc, known, field, depth + 1), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 3, 3) });
    case 'object':
    case undefined: {
      if (depth > 3 || !s.properties) {
        const values = typeof s.additionalProperties === 'object' ? valid(s.additionalProperties, doc, known, field, depth + 1) : fc.string();
        return fc.dictionary(fc.constantFrom('a', 'B_2', 'x/y', 'workspace/f', '/etc/x'), values, { maxKeys: 3 });
      }
      const required = new Set(s.required ?? []);
      const entries = Object.entries(s.properties).map(([key, value]) => [key, fuzzed(value, doc, known, key, depth + 1)] as const);
      return fc.record(Object.fromEntries(entries), { requiredKeys: Object.keys(s.properties).filter((key) => required.has(key)) });
    }
    default:
      return fc.constant(null);
  }
}

/** Mostly valid values, sometimes boundary or malicious ones of any type. */
export function fuzzed(schema: JsonSchema | undefined, doc: OpenApiDocument, known: KnownNames, field: string, depth = 0): fc.Arbitrary<unknown> {
  return fc.oneof(
    { weight: 6, arbitrary: valid(schema, doc, known, field, depth) },
    { weight: 1, arbitrary: fc.constantFrom(...MALICIOUS_STRINGS) },
    { weight: 1, arbitrary: fc.constantFrom(...ODD_NUMBERS) },
    { weight: 1, arbitrary: fc.constantFrom(...WRONG_TYPES) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  );
}

/** A path parameter as it goes into the URL: encoded, raw, double-encoded or traversing. */
function pathSegment(value: unknown): fc.Arbitrary<string> {
  const text = typeof value === 'string' ? value : JSON.stringify(value) ?? 'undefined';
  const encoded = encodeURIComponent(text.replace(/[\ud800-\udfff]/g, '\ufffd'));
  return fc.constantFrom(encoded, encoded, encoded, encodeURIComponent(encoded), text.replace(/[^\x21-\x7e]/g, (c) => encodeURIComponent(c.replace(/[\ud800-\udfff]/g, '?'))));
}

/** Every operation of the document as [method, route, operation]. */
export function operationsOf(doc: OpenApiDocument): Array<[string, string, Operation]> {
  const out: Array<[string, string, Operation]> = [];
  for (const [route, operations] of Object.entries(doc.paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      if (['get', 'post', 'put', 'patch', 'delete'].includes(method)) out.push([method.toUpperCase(), route, operation]);
    }
  }
  return out;
}

/** Bodies as they go on the wire: JSON mostly, also broken JSON, forms, raw bytes and nothing. */
type WireBody = { body?: string | Uint8Array; type?: string };

function bodyOf(value: unknown): fc.Arbitrary<WireBody> {
  const json = JSON.stringify(value) ?? 'null';
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant({ body: json, type: 'application/json' }) },
    { weight: 1, arbitrary: fc.constant({ body: json.slice(0, Math.max(1, json.length - 2)), type: 'application/json' }) },
    { weight: 1, arbitrary: fc.constant({ body: 'name=x&image=y', type: 'application/x-www-form-urlencoded' }) },
    { weight: 1, arbitrary: fc.constant({ body: json, type: 'application/x-www-form-urlencoded' }) },
    { weight: 1, arbitrary: fc.constant({ body: new Uint8Array([0, 1, 2, 255]), type: 'application/octet-stream' }) },
    { weight: 1, arbitrary: fc.constant({ body: json, type: 'text/plain; charset=utf-16' }) },
    { weight: 1, arbitrary: fc.constant<WireBody>({}) },
  );
}

/** A generator of requests across every operation of `doc`. */
export function requestArbitrary(doc: OpenApiDocument, known: KnownNames): fc.Arbitrary<FuzzRequest> {
  const perOperation = operationsOf(doc).map(([method, route, operation]) => {
    const pathParams = (operation.parameters ?? []).filter((p) => p.in === 'path');
    const queryParams = (operation.parameters ?? []).filter((p) => p.in === 'query');
    const content = operation.requestBody?.content ?? {};
    const bodySchema = content['application/json']?.schema;
    const params = fc.tuple(...pathParams.map((p) => fuzzed(p.schema, doc, known, p.name).chain(pathSegment)));
    const query = fc.array(
      fc.tuple(
        fc.constantFrom(...queryParams.map((p) => p.name), 'unknown', 'a[b]', '__proto__'),
        fc.constantFrom('x', '', '1', '-1', '99999999999', 'a:b', '%00', 'running'),
      ),
      { maxLength: 3 },
    );
    const body = operation.requestBody ? fuzzed(bodySchema, doc, known, 'body').chain(bodyOf) : fc.constant<WireBody>({});
    return fc.tuple(params, query, body).map(([values, pairs, { body: payload, type }]): FuzzRequest => {
      let path = route;
      pathParams.forEach((param, i) => (path = path.replace(`{${param.name}}`, values[i]!)));
      if (pairs.length > 0) path += `?${pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')}`;
      return {
        method,
        route,
        path,
        headers: type ? { 'content-type': type } : {},
        ...(payload !== undefined ? { body: payload } : {}),
      };
    });
  });
  return fc.oneof(...perOperation);
}
