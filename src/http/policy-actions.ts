import type { Action, RequestContext } from '../services/governance/index.js';
import { HOST_FORM_ROUTE, PATH_FORM_ROUTES, PREVIEW_METHODS } from './preview-access.js';

/** What a route entry reads of a request: its validated params, body and query. */
export interface RouteInput {
  params: Record<string, string>;
  body: Record<string, unknown> | undefined;
  query: Record<string, unknown> | undefined;
}

/** Stored facts a route entry may look up (a sandbox's name from its uuid). */
export interface RouteLookups {
  sandboxName(uuid: string): Promise<string | undefined>;
}

/** How policy sees one route: the action, the resource it acts on and the request's context. */
export interface RouteAction {
  action: Action;
  resource: (input: RouteInput, lookups: RouteLookups) => string | Promise<string>;
  /** Context the request itself gives; a batch gives one per command (each is decided). */
  context?: (input: RouteInput) => RequestContext | RequestContext[];
  /** The existing sandbox whose labels, image and profile feed the context when a rule tests them. */
  sandbox?: (input: RouteInput, lookups: RouteLookups) => string | Promise<string>;
}

const param = (name: string) => (input: RouteInput) => input.params[name] ?? '';
const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const labelsOf = (value: unknown): Record<string, string> | undefined =>
  typeof value === 'object' && value !== null ? (value as Record<string, string>) : undefined;

/** The context of an exec-like body: sudo and the program. */
function execContext(body: Record<string, unknown> | undefined): RequestContext {
  const command = body?.command;
  const command0 = Array.isArray(command) ? text(command[0]) : text(command)?.trim().split(/\s+/)[0];
  return { sudo: body?.sudo === true, ...(command0 ? { command0 } : {}) };
}

/** The context of a /run body: an exec in a fresh sandbox of this image and profile. */
function runContext(body: Record<string, unknown> | undefined): RequestContext {
  const image = text(body?.image);
  const profile = text(body?.profile);
  return { ...execContext(body), ...(image ? { image } : {}), ...(profile ? { profile } : {}) };
}

const all = (kind: string) => () => `${kind}:*`;
const named = (kind: string, name: string) => (input: RouteInput) => `${kind}:${input.params[name] ?? ''}`;
const sandbox = named('sandbox', 'name');
const onSandbox = (action: Action, extra: Partial<RouteAction> = {}): RouteAction => ({ action, resource: sandbox, sandbox: param('name'), ...extra });
/** One entry per forwarded method (HEAD is decided by GET's) of each preview route. */
function previewEntries(): Record<string, RouteAction> {
  const methods = PREVIEW_METHODS.filter((method) => method !== 'HEAD');
  const routes = [...PATH_FORM_ROUTES, HOST_FORM_ROUTE];
  return Object.fromEntries(routes.flatMap((url) => methods.map((method) => [`${method} ${url}`, onSandbox('sandbox.preview')])));
}
const objectByName = (input: RouteInput) => `object:${input.params.class}/${input.params.object_id}`;

/**
 * Every route of the HTTP API (method and template, as Fastify registers it) and what the
 * policy sees of it; `open` routes (health and status, answered without a key) are not decided.
 * A route missing here is refused at start-up (see registerPolicy), and a unit test lists
 * every registered route against this table, so no new route slips past the policy.
 */
export const ROUTE_ACTIONS: Record<string, RouteAction | 'open'> = {
  'GET /health': 'open',
  'GET /status': 'open',
  // The dashboard's static files and the API reference page (its calls are API routes, decided).
  'GET /': 'open',
  'GET /ui': 'open',
  'GET /ui/*': 'open',
  'GET /docs': 'open',
  'GET /stats': { action: 'service.stats', resource: () => 'service:stats' },
  'GET /metrics': { action: 'service.metrics', resource: () => 'service:metrics' },
  'GET /openapi.json': { action: 'service.openapi', resource: () => 'service:openapi' },
  'GET /events': { action: 'events.read', resource: (i) => `events:${text(i.query?.sandbox) ?? '*'}` },

  'GET /sandboxes': { action: 'sandbox.list', resource: all('sandbox') },
  'POST /sandboxes': {
    action: 'sandbox.create',
    resource: (i) => `sandbox:${text(i.body?.name) ?? ''}`,
    context: (i) => {
      const image = text(i.body?.image);
      const profile = text(i.body?.profile);
      const labels = labelsOf(i.body?.labels);
      return { ...(image ? { image } : {}), profile: profile ?? 'moderate', ...(labels ? { labels } : {}) };
    },
  },
  // Decided on the sandbox's name, like GET /sandboxes/:name: a rule on sandbox:prod-* covers both.
  'GET /sandboxes/by-uuid/:uuid': {
    action: 'sandbox.get',
    resource: async (i, lookups) => `sandbox:${(await lookups.sandboxName(i.params.uuid ?? '')) ?? i.params.uuid}`,
    sandbox: async (i, lookups) => (await lookups.sandboxName(i.params.uuid ?? '')) ?? '',
  },
  'GET /sandboxes/:name': onSandbox('sandbox.get'),
  'PATCH /sandboxes/:name': onSandbox('sandbox.update'),
  'POST /sandboxes/:name/start': onSandbox('sandbox.start'),
  'POST /sandboxes/:name/stop': onSandbox('sandbox.stop'),
  'DELETE /sandboxes/:name': onSandbox('sandbox.delete'),
  'GET /sandboxes/:name/logs': onSandbox('sandbox.logs'),
  'POST /sandboxes/:name/exec': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
  'POST /sandboxes/:name/exec/stream': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
  'POST /sandboxes/:name/exec/detach': onSandbox('sandbox.exec', { context: (i) => execContext(i.body) }),
  'GET /sandboxes/:name/exec/detached': onSandbox('sandbox.get'),
  'GET /sandboxes/:name/exec/detached/:id': onSandbox('sandbox.get'),
  'GET /sandboxes/:name/exec/detached/:id/logs': onSandbox('sandbox.get'),
  'DELETE /sandboxes/:name/exec/detached/:id': onSandbox('sandbox.exec'),
  // A terminal runs whatever is typed at it: an exec, decided as one (and so is its token).
  'GET /sandboxes/:name/pty': onSandbox('sandbox.exec', { context: () => ({ sudo: false }) }),
  'POST /sandboxes/:name/pty/token': onSandbox('sandbox.exec', { context: () => ({ sudo: false }) }),
  'PUT /sandboxes/:name/files/*': onSandbox('sandbox.files.write'),
  'GET /sandboxes/:name/files/*': onSandbox('sandbox.files.read'),
  'DELETE /sandboxes/:name/files/*': onSandbox('sandbox.files.delete'),
  'POST /sandboxes/:name/files': onSandbox('sandbox.files.write'),
  'GET /sandboxes/:name/fs': onSandbox('sandbox.files.read'),
  'GET /sandboxes/:name/fs/stat': onSandbox('sandbox.files.read'),
  'GET /sandboxes/:name/fs/watch': onSandbox('sandbox.files.read'),
  'GET /volumes': { action: 'volume.list', resource: all('volume') },
  'POST /volumes': { action: 'volume.create', resource: (i) => `volume:${text(i.body?.name) ?? ''}` },
  'GET /volumes/:name': { action: 'volume.get', resource: named('volume', 'name') },
  'DELETE /volumes/:name': { action: 'volume.delete', resource: named('volume', 'name') },
  'POST /sandboxes/:name/recover': onSandbox('sandbox.recover'),
  'POST /sandboxes/:name/resize': onSandbox('sandbox.resize'),
  'POST /sandboxes/:name/extend': onSandbox('sandbox.extend'),
  // Preview URLs: every method of both forms (the host form's internal route included) and minting.
  ...previewEntries(),
  'POST /sandboxes/:name/ports/:port/url': onSandbox('sandbox.preview'),
  'POST /sandboxes/:name/browser/start': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/goto': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/click': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/fill': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page/screenshot': onSandbox('sandbox.browser'),
  'POST /sandboxes/:name/browser/pages/:page/evaluate': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/pages/:page/content': onSandbox('sandbox.browser'),
  'DELETE /sandboxes/:name/browser/pages/:page': onSandbox('sandbox.browser'),
  'GET /sandboxes/:name/browser/events': onSandbox('sandbox.browser'),

  'POST /run': { action: 'run', resource: all('run'), context: (i) => runContext(i.body) },
  'POST /run/stream': { action: 'run', resource: all('run'), context: (i) => runContext(i.body) },
  'POST /batch/run': {
    action: 'run',
    resource: all('run'),
    context: (i) => (Array.isArray(i.body?.commands) ? (i.body.commands as Record<string, unknown>[]).map(runContext) : []),
  },

  'GET /snapshots': { action: 'snapshot.list', resource: all('snapshot') },
  'POST /snapshots': { action: 'snapshot.create', resource: (i) => `snapshot:${text(i.body?.name) ?? ''}`, sandbox: (i) => text(i.body?.sandbox) ?? '' },
  'GET /snapshots/:name': { action: 'snapshot.get', resource: named('snapshot', 'name') },
  'DELETE /snapshots/:name': { action: 'snapshot.delete', resource: named('snapshot', 'name') },
  'POST /snapshots/:name/restore': { action: 'snapshot.restore', resource: named('snapshot', 'name') },
  'GET /images': { action: 'image.list', resource: all('image') },
  'POST /images': { action: 'image.build', resource: (i) => `image:${text(i.body?.name) ?? ''}` },
  'DELETE /images/:name': { action: 'image.delete', resource: named('image', 'name') },

  'POST /gc': { action: 'admin.gc', resource: () => 'service:gc' },
  'POST /lifecycle/reconcile': { action: 'admin.reconcile', resource: () => 'service:reconcile' },

  'GET /objects/classes': { action: 'object.class.list', resource: all('object.class') },
  'POST /objects/classes': { action: 'object.class.define', resource: (i) => `object.class:${text(i.body?.name) ?? ''}` },
  'GET /objects/classes/:class': { action: 'object.class.get', resource: named('object.class', 'class') },
  'DELETE /objects/classes/:class': { action: 'object.class.delete', resource: named('object.class', 'class') },
  'GET /objects': { action: 'object.list', resource: all('object') },
  'POST /objects': { action: 'object.create', resource: (i) => `object:${text(i.body?.class) ?? ''}/${text(i.body?.object_id) ?? ''}` },
  'GET /objects/:id': { action: 'object.get', resource: named('object', 'id') },
  'PATCH /objects/:id': { action: 'object.update', resource: named('object', 'id') },
  'DELETE /objects/:id': { action: 'object.delete', resource: named('object', 'id') },
  'GET /objects/:class/:object_id': { action: 'object.get', resource: objectByName },
  'POST /objects/:class/:object_id/call/:method': { action: 'object.call', resource: objectByName },
  'POST /objects/:class/:object_id/alarm': { action: 'object.alarm', resource: objectByName },
  'GET /objects/:class/:object_id/alarm': { action: 'object.get', resource: objectByName },
  'DELETE /objects/:class/:object_id/alarm': { action: 'object.alarm', resource: objectByName },
  'GET /objects/:class/:object_id/calls': { action: 'object.get', resource: objectByName },

  'GET /schedules': { action: 'schedule.list', resource: all('schedule') },
  'POST /schedules': { action: 'schedule.create', resource: (i) => `schedule:${text(i.body?.name) ?? ''}` },
  'GET /schedules/:id': { action: 'schedule.get', resource: named('schedule', 'id') },
  'GET /schedules/:id/status': { action: 'schedule.get', resource: named('schedule', 'id') },
  'PATCH /schedules/:id': { action: 'schedule.update', resource: named('schedule', 'id') },
  'DELETE /schedules/:id': { action: 'schedule.delete', resource: named('schedule', 'id') },
  'POST /schedules/:id/trigger': { action: 'schedule.trigger', resource: named('schedule', 'id') },
  'GET /schedules/:id/runs': { action: 'schedule.get', resource: named('schedule', 'id') },

  'GET /stores': { action: 'store.list', resource: all('store') },
  'POST /stores': { action: 'store.create', resource: (i) => `store:${text(i.body?.name) ?? ''}` },
  'GET /stores/:id': { action: 'store.get', resource: named('store', 'id') },
  'PATCH /stores/:id': { action: 'store.update', resource: named('store', 'id') },
  'DELETE /stores/:id': { action: 'store.delete', resource: named('store', 'id') },
  'POST /stores/:id/query': { action: 'store.query', resource: named('store', 'id') },
  'POST /stores/:id/execute': { action: 'store.execute', resource: named('store', 'id') },
  'POST /stores/:id/command': { action: 'store.command', resource: named('store', 'id') },

  'GET /orchestrations/definitions': { action: 'orchestration.definition.list', resource: all('orchestration-definition') },
  'POST /orchestrations/definitions': { action: 'orchestration.definition.create', resource: (i) => `orchestration-definition:${text(i.body?.name) ?? ''}` },
  'GET /orchestrations/definitions/:name': { action: 'orchestration.definition.get', resource: named('orchestration-definition', 'name') },
  'DELETE /orchestrations/definitions/:name': { action: 'orchestration.definition.delete', resource: named('orchestration-definition', 'name') },
  'POST /orchestrations': { action: 'orchestration.start', resource: (i) => `orchestration-definition:${text(i.body?.name) ?? ''}` },
  'GET /orchestrations': { action: 'orchestration.list', resource: all('orchestration') },
  'GET /orchestrations/:id': { action: 'orchestration.get', resource: named('orchestration', 'id') },
  'POST /orchestrations/:id/events': { action: 'orchestration.event', resource: named('orchestration', 'id') },
  'POST /orchestrations/:id/terminate': { action: 'orchestration.terminate', resource: named('orchestration', 'id') },
  'DELETE /orchestrations/:id': { action: 'orchestration.delete', resource: named('orchestration', 'id') },

  'GET /policy/status': { action: 'policy.status', resource: () => 'policy:*' },
  'POST /policy/check': { action: 'policy.check', resource: () => 'policy:*' },
  'POST /policy/reload': { action: 'policy.reload', resource: () => 'policy:*' },
  'GET /policy/audit': { action: 'policy.audit', resource: () => 'policy:*' },
  'GET /permissions': { action: 'permissions.list', resource: all('permission') },
  'POST /permissions/grant': { action: 'permissions.grant', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },
  'POST /permissions': { action: 'permissions.grant', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },
  'DELETE /permissions/:id': { action: 'permissions.revoke', resource: named('permission', 'id') },
  'POST /permissions/check': { action: 'permissions.check', resource: (i) => `principal:${text(i.body?.principal) ?? ''}` },

  'GET /llm/keys': { action: 'llm.keys.list', resource: all('llm-key') },
  'PUT /llm/keys/:provider': { action: 'llm.keys.set', resource: named('llm-key', 'provider') },
  'DELETE /llm/keys/:provider': { action: 'llm.keys.delete', resource: named('llm-key', 'provider') },
  'GET /llm/usage': { action: 'llm.usage', resource: all('sandbox') },
  'GET /llm/usage/:sandbox': { action: 'llm.usage', resource: named('sandbox', 'sandbox') },

  'GET /proxy/hooks': { action: 'proxy.hooks.list', resource: all('proxy-hook') },
  'POST /proxy/hooks': { action: 'proxy.hooks.create', resource: (i) => `proxy-hook:${text(i.body?.name) ?? ''}` },
  'DELETE /proxy/hooks/:name': { action: 'proxy.hooks.delete', resource: named('proxy-hook', 'name') },
  'DELETE /proxy/hooks': { action: 'proxy.hooks.delete', resource: (i) => `proxy-hook:${text(i.query?.name) ?? ''}` },
  'GET /proxy/log': { action: 'proxy.log', resource: (i) => `sandbox:${text(i.query?.sandbox) ?? '*'}` },
};
