import type { Action, RequestContext } from '../services/governance/index.js';
import { HOST_FORM_ROUTE, PATH_FORM_ROUTES, PREVIEW_METHODS } from './preview-access.js';

/**
 * The parts of policy's route table (src/http/policy-actions.ts): what an entry is and the helpers
 * that each route file's own entries (`<resource>RouteActions`, beside its routes) are written with.
 */

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

export const param = (name: string) => (input: RouteInput) => input.params[name] ?? '';
export const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
export const labelsOf = (value: unknown): Record<string, string> | undefined =>
  typeof value === 'object' && value !== null ? (value as Record<string, string>) : undefined;

/** The context of an exec-like body: sudo and the program. */
export function execContext(body: Record<string, unknown> | undefined): RequestContext {
  const command = body?.command;
  const command0 = Array.isArray(command) ? text(command[0]) : text(command)?.trim().split(/\s+/)[0];
  return { sudo: body?.sudo === true, ...(command0 ? { command0 } : {}) };
}

/** The context of a /run body: an exec in a fresh sandbox of this image and profile. */
export function runContext(body: Record<string, unknown> | undefined): RequestContext {
  const image = text(body?.image);
  const profile = text(body?.profile);
  return { ...execContext(body), ...(image ? { image } : {}), ...(profile ? { profile } : {}) };
}

export const all = (kind: string) => () => `${kind}:*`;
export const named = (kind: string, name: string) => (input: RouteInput) => `${kind}:${input.params[name] ?? ''}`;
const sandbox = named('sandbox', 'name');
export const onSandbox = (action: Action, extra: Partial<RouteAction> = {}): RouteAction => ({ action, resource: sandbox, sandbox: param('name'), ...extra });
/** One entry per forwarded method (HEAD is decided by GET's) of each preview route. */
export function previewEntries(): Record<string, RouteAction> {
  const methods = PREVIEW_METHODS.filter((method) => method !== 'HEAD');
  const routes = [...PATH_FORM_ROUTES, HOST_FORM_ROUTE];
  return Object.fromEntries(routes.flatMap((url) => methods.map((method) => [`${method} ${url}`, onSandbox('sandbox.preview')])));
}
export const objectByName = (input: RouteInput) => `object:${input.params.class}/${input.params.object_id}`;
