import { PREVIEW_METHODS } from './preview-access.js';

/**
 * What makes the generated OpenAPI document good for client generators: an `operationId` on
 * every operation, one component per schema (no identical `XInput` / `X` pair), and a server.
 */

/** Collections whose segment names one member when a path parameter follows it. */
const MEMBER_OF: Record<string, string> = {
  sandboxes: 'sandbox',
  snapshots: 'snapshot',
  volumes: 'volume',
  images: 'image',
  objects: 'object',
  classes: 'class',
  schedules: 'schedule',
  stores: 'store',
  files: 'file',
  pages: 'page',
  runs: 'run',
  calls: 'call',
  orchestrations: 'orchestration',
  definitions: 'definition',
  permissions: 'permission',
  keys: 'key',
  hooks: 'hook',
};

/** The preview proxy's operations, one per method: `previewGet` (a path past the port) and `previewGetRoot`. */
function previewOperations(): Record<string, string> {
  const name = (method: string) => `preview${method[0]}${method.slice(1).toLowerCase()}`;
  return Object.fromEntries(
    PREVIEW_METHODS.flatMap((method) => [
      [`${method} /sandboxes/:name/ports/:port`, `${name(method)}Root`],
      [`${method} /sandboxes/:name/ports/:port/*`, name(method)],
    ]),
  );
}

/**
 * Names that read better than the rule's (keyed `METHOD /path`, Fastify's path form). A route
 * may also set `operationId` in its own schema, which wins over both.
 */
const NAMED: Record<string, string> = {
  'GET /sandboxes/by-uuid/:uuid': 'getSandboxByUuid',
  'POST /sandboxes/:name/exec': 'execCommand',
  'POST /sandboxes/:name/exec/stream': 'execCommandStream',
  'POST /sandboxes/:name/exec/detach': 'startDetachedCommand',
  'GET /sandboxes/:name/exec/detached': 'listDetachedCommands',
  'GET /sandboxes/:name/exec/detached/:id': 'getDetachedCommand',
  'DELETE /sandboxes/:name/exec/detached/:id': 'killDetachedCommand',
  'GET /sandboxes/:name/exec/detached/:id/logs': 'getDetachedCommandLogs',
  'PUT /sandboxes/:name/files/*': 'writeFile',
  'GET /sandboxes/:name/files/*': 'readFile',
  'DELETE /sandboxes/:name/files/*': 'deleteFile',
  'POST /sandboxes/:name/files': 'writeFiles',
  'GET /sandboxes/:name/archive': 'packDirectory',
  'PUT /sandboxes/:name/archive': 'unpackArchive',
  'GET /sandboxes/:name/fs': 'listDirectory',
  'GET /sandboxes/:name/fs/stat': 'statPath',
  'GET /sandboxes/:name/fs/watch': 'watchPath',
  'POST /run': 'runCommand',
  'POST /run/stream': 'runCommandStream',
  'POST /batch/run': 'runBatch',
  'GET /events': 'streamEvents',
  'POST /gc': 'collectGarbage',
  'POST /sandboxes/:name/browser/start': 'startBrowser',
  'GET /sandboxes/:name/browser/pages': 'listBrowserPages',
  'GET /sandboxes/:name/browser/pages/:page': 'getBrowserPage',
  'DELETE /sandboxes/:name/browser/pages/:page': 'closeBrowserPage',
  'POST /sandboxes/:name/browser/pages/:page/goto': 'gotoBrowserPage',
  'POST /sandboxes/:name/browser/pages/:page/click': 'clickBrowserPage',
  'POST /sandboxes/:name/browser/pages/:page/fill': 'fillBrowserPage',
  'POST /sandboxes/:name/browser/pages/:page/evaluate': 'evaluateBrowserPage',
  'GET /sandboxes/:name/browser/pages/:page/screenshot': 'screenshotBrowserPage',
  'GET /sandboxes/:name/browser/pages/:page/content': 'getBrowserPageContent',
  'GET /sandboxes/:name/browser/events': 'streamBrowserEvents',
  'POST /sandboxes/:name/ports/:port/url': 'createPreviewUrl',
  ...previewOperations(),
  'GET /objects/classes': 'listObjectClasses',
  'POST /objects/classes': 'defineObjectClass',
  'GET /objects/classes/:class': 'getObjectClass',
  'DELETE /objects/classes/:class': 'deleteObjectClass',
  'GET /objects/:class/:object_id': 'getObjectByKey',
  'POST /objects/:class/:object_id/call/:method': 'callObjectMethod',
  'POST /objects/:class/:object_id/alarm': 'setObjectAlarm',
  'POST /stores/:id/command': 'sendStoreCommand',
  'GET /llm/usage/:sandbox': 'getSandboxLlmUsage',
  'PUT /llm/keys/:provider': 'setLlmKey',
  'DELETE /proxy/hooks': 'deleteProxyHookByName',
  'POST /images': 'buildImage',
};

const pascal = (word: string) => word.replace(/(?:^|[-_.])([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/**
 * The operationId of a route: its entry in NAMED, else a verb and the nouns of its path
 * (`GET /sandboxes` -> listSandboxes, `POST /sandboxes` -> createSandbox, `GET /sandboxes/:name`
 * -> getSandbox, `POST /sandboxes/:name/start` -> startSandbox, `GET /schedules/:id/runs` ->
 * listScheduleRuns). Uniqueness is checked over the whole document by `tidyDocument`.
 */
export function operationIdFor(method: string, url: string): string {
  const named = NAMED[`${method} ${url}`];
  if (named) return named;
  const segments = url.split('/').filter(Boolean);
  const isParam = (s: string | undefined) => s !== undefined && (s.startsWith(':') || s === '*');
  const words = segments.flatMap((s, i) => (isParam(s) ? [] : [isParam(segments[i + 1]) ? (MEMBER_OF[s] ?? s) : s]));
  const last = segments.at(-1) ?? '';
  const member = MEMBER_OF[last];
  let verb: string;
  if (isParam(last)) verb = { GET: 'get', PATCH: 'update', PUT: 'put', DELETE: 'delete' }[method] ?? method.toLowerCase();
  else if (method === 'GET') verb = member ? 'list' : 'get';
  else if (method === 'POST' && member) {
    verb = 'create';
    words[words.length - 1] = member;
  } else if (method === 'POST' && words.length > 1) {
    // The last word is the action on the resource before it (`POST /schedules/:id/trigger`).
    const action = pascal(words.pop() ?? '');
    verb = action.charAt(0).toLowerCase() + action.slice(1);
  } else verb = method.toLowerCase();
  return verb + words.map(pascal).join('');
}

type Json = unknown;
type Document = { paths?: Record<string, Record<string, { operationId?: string }>>; components?: { schemas?: Record<string, Json> }; servers?: unknown };

/** A copy without `additionalProperties: false` and `$id`, with the refs of `rename` rewritten. */
function comparable(value: Json, rename: Map<string, string>): Json {
  if (Array.isArray(value)) return value.map((v) => comparable(v, rename));
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, Json> = {};
  for (const [key, v] of Object.entries(value)) {
    if (key === '$id' || (key === 'additionalProperties' && v === false)) continue;
    out[key] = key === '$ref' && typeof v === 'string' ? (rename.get(v) ?? v) : comparable(v, rename);
  }
  return out;
}

const ref = (name: string) => `#/components/schemas/${name}`;

/**
 * The zod provider writes every named schema twice, as read (`XInput`) and as written (`X`);
 * most pairs differ only in `additionalProperties: false`, which generators turn into two
 * identical types. Such a pair becomes one component `X` holding the read form (a request body
 * may carry fields the server ignores); pairs that really differ (a default makes a field
 * optional on input) stay two, unless nothing refers to the written form. Also checks that operationIds are unique.
 */
export function tidyDocument<T extends object>(document: T): T {
  const doc = document as Document;
  const schemas = doc.components?.schemas ?? {};
  const rename = new Map<string, string>();
  // A written form nothing refers to (a schema only ever read, such as a request body) is no pair.
  const text0 = JSON.stringify(document);
  const unused = (name: string) => text0.split(`"$ref":"${ref(name)}"`).length === 1;
  // A pair is identical only once the pairs its members refer to are merged: repeat to a fixpoint.
  for (let changed = true; changed; ) {
    changed = false;
    for (const name of Object.keys(schemas)) {
      const base = name.slice(0, -'Input'.length);
      if (!name.endsWith('Input') || !(base in schemas) || rename.has(ref(name))) continue;
      const input = JSON.stringify(comparable(schemas[name], rename));
      if (unused(base) || input === JSON.stringify(comparable(schemas[base], rename))) {
        rename.set(ref(name), ref(base));
        changed = true;
      }
    }
  }
  for (const [from, to] of rename) {
    const name = from.slice(ref('').length);
    const base = to.slice(ref('').length);
    schemas[base] = { ...(schemas[name] as object), $id: to };
    delete schemas[name];
  }
  const text = JSON.stringify(document).replace(/"(#\/components\/schemas\/[A-Za-z0-9_.-]+Input)"/g, (all, target: string) =>
    rename.has(target) ? JSON.stringify(rename.get(target)) : all,
  );
  const tidy = JSON.parse(text) as T & Document;
  const seen = new Map<string, string>();
  for (const [path, operations] of Object.entries(tidy.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const id = operation.operationId;
      const where = `${method.toUpperCase()} ${path}`;
      if (!id) throw new Error(`OpenAPI: ${where} has no operationId`);
      if (seen.has(id)) throw new Error(`OpenAPI: operationId ${id} of ${where} is also that of ${seen.get(id)}`);
      seen.set(id, where);
    }
  }
  return tidy;
}
