import { destinationsOf, targetMatches } from '../../domain/destinations.js';
import { conflict, notFound } from '../../errors.js';
import type { CreateProxyHookInput, ProxyHook, ProxyHookMatch, ProxyHookTarget } from '../../schemas/proxy-schemas.js';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import type { Logger } from '../../telemetry/logger.js';
import type { AuditApi } from '../events/api.js';
import { isoNow, type Clock } from '../support/clock.js';
import { pathPrefixMatcher } from './hook-paths.js';

/** What a hook sees of a request through the proxy (for CONNECT: host and port only). */
export interface ProxyRequestFacts {
  timestamp: string;
  sandbox: string;
  sandbox_uuid: string;
  labels: Record<string, string>;
  method: string;
  url: string;
  host: string;
  port: number;
  /** '' for CONNECT. */
  path: string;
  /** Authorization and cookies redacted, the proxy's own headers left out. */
  headers: Record<string, string | string[]>;
}

/** What an `on_response` hook is told once a request is done. */
export interface ProxyOutcome {
  status: number;
  bytes_in: number;
  bytes_out: number;
  latency_ms: number;
  decision: 'allow' | 'deny';
}

/** The verdict of the `on_request` hooks. */
export type HookVerdict = { decision: 'allow' } | { decision: 'deny'; status: number; reason: string; hook: string };

/** Notifications of `on_response` hooks waiting to be sent; past it new ones are dropped (and counted). */
const RESPONSE_QUEUE = 1000;
const RESPONSE_WORKERS = 2;

interface Compiled {
  hook: ProxyHook;
  matches: (facts: ProxyRequestFacts) => boolean;
}

/**
 * Hooks of the egress proxy, persisted in the state store and applied to every request at
 * once (the list is reloaded after each change and read at start). `on_request` hooks run in
 * creation order before a request is forwarded: `block` denies, `webhook` is asked
 * `{action: allow|deny}` (its `fail` applies when it errs or is late), `audit` records an
 * event. `on_response` hooks are told after the request, from a bounded queue, never delaying it.
 */
export class ProxyHooks {
  private compiled: Promise<Compiled[]> | undefined;
  private readonly queue: (() => Promise<void>)[] = [];
  private working = 0;
  /** Notifications dropped because the queue was full. */
  dropped = 0;

  constructor(
    private readonly input: {
      repo: ProxyRepository;
      audit: AuditApi;
      clock: Clock;
      logger: Logger;
      /** Publishes an audit hook's record (the `proxy.audited` event). */
      audited: (facts: ProxyRequestFacts, hook: string, outcome?: ProxyOutcome) => void;
    },
  ) {}

  async list(): Promise<ProxyHook[]> {
    return (await this.hooks()).map((c) => c.hook);
  }

  async create(body: CreateProxyHookInput): Promise<ProxyHook> {
    const hook: ProxyHook = { name: body.name, event: body.event, match: body.match ?? {}, target: body.target, created_at: isoNow(this.input.clock) };
    const inserted = await this.input.repo.insertHook({ name: hook.name, event: hook.event, match: JSON.stringify(hook.match), target: JSON.stringify(hook.target), created_at: hook.created_at });
    if (!inserted) throw conflict(`proxy hook '${hook.name}' already exists`, { hint: { action: 'delete_proxy_hook', hook: hook.name } });
    this.compiled = undefined;
    this.input.audit.resourceEvent('proxy.hook.created', { kind: 'proxy-hook', id: hook.name, name: hook.name }, { event: hook.event, target: hook.target.type });
    return hook;
  }

  async remove(name: string): Promise<string> {
    if (!(await this.input.repo.deleteHook(name))) throw notFound(`proxy hook '${name}' not found`);
    this.compiled = undefined;
    this.input.audit.resourceEvent('proxy.hook.deleted', { kind: 'proxy-hook', id: name, name });
    return `proxy hook '${name}' deleted`;
  }

  /** Runs the matching `on_request` hooks in creation order; the first deny decides. */
  async onRequest(facts: ProxyRequestFacts): Promise<HookVerdict> {
    for (const { hook, matches } of await this.hooks()) {
      if (hook.event !== 'on_request' || !matches(facts)) continue;
      const target = hook.target;
      if (target.type === 'block') return { decision: 'deny', status: target.status, reason: `blocked by proxy hook '${hook.name}'`, hook: hook.name };
      if (target.type === 'audit') {
        this.input.audited(facts, hook.name);
        continue;
      }
      const verdict = await this.ask(hook.name, target, facts);
      if (verdict) return verdict;
    }
    return { decision: 'allow' };
  }

  /** Tells the matching `on_response` hooks, in the background. */
  async onResponse(facts: ProxyRequestFacts, outcome: ProxyOutcome): Promise<void> {
    for (const { hook, matches } of await this.hooks()) {
      if (hook.event !== 'on_response' || !matches(facts)) continue;
      const target = hook.target;
      if (target.type === 'audit') this.input.audited(facts, hook.name, outcome);
      else if (target.type === 'webhook') this.enqueue(() => this.notify(hook.name, target, { ...facts, ...outcome }));
    }
  }

  private hooks(): Promise<Compiled[]> {
    this.compiled ??= this.compile().catch((err: unknown) => {
      this.compiled = undefined;
      throw err;
    });
    return this.compiled;
  }

  private async compile(): Promise<Compiled[]> {
    return (await this.input.repo.hooks()).map((row) => {
      const hook: ProxyHook = {
        name: row.name,
        event: row.event as ProxyHook['event'],
        match: JSON.parse(row.match) as ProxyHookMatch,
        target: JSON.parse(row.target) as ProxyHookTarget,
        created_at: row.created_at,
      };
      return { hook, matches: compileMatch(hook.match) };
    });
  }

  /** A webhook's verdict: undefined to go on (allow), a deny to stop. */
  private async ask(name: string, target: Extract<ProxyHookTarget, { type: 'webhook' }>, facts: ProxyRequestFacts): Promise<HookVerdict | undefined> {
    let failure: string;
    try {
      const answer = await fetch(target.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(payloadOf(facts)),
        signal: AbortSignal.timeout(target.timeout_ms),
      });
      const text = await answer.text();
      if (answer.ok) {
        const body = parse(text);
        if (body?.action === 'allow') return undefined;
        if (body?.action === 'deny') {
          const reason = typeof body.reason === 'string' && body.reason ? `: ${body.reason.slice(0, 500)}` : '';
          return { decision: 'deny', status: 403, reason: `denied by proxy hook '${name}'${reason}`, hook: name };
        }
        failure = 'its answer is not {"action": "allow"|"deny"}';
      } else failure = `it answered ${answer.status}`;
    } catch (err) {
      const e = err as Error;
      failure = e.name === 'TimeoutError' ? `no answer within ${target.timeout_ms} ms` : `it could not be reached (${causeOf(e)})`;
    }
    this.input.logger.warn({ hook: name, failure, fail: target.fail }, 'proxy hook webhook failed');
    if (target.fail === 'open') return undefined;
    return { decision: 'deny', status: 403, reason: `proxy hook '${name}' failed (${failure}) and fails closed`, hook: name };
  }

  private async notify(name: string, target: Extract<ProxyHookTarget, { type: 'webhook' }>, body: ProxyRequestFacts & ProxyOutcome): Promise<void> {
    try {
      const answer = await fetch(target.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ...payloadOf(body), status: body.status, bytes_in: body.bytes_in, bytes_out: body.bytes_out, latency_ms: body.latency_ms, decision: body.decision }),
        signal: AbortSignal.timeout(target.timeout_ms),
      });
      await answer.arrayBuffer();
    } catch (err) {
      this.input.logger.debug({ hook: name, failure: causeOf(err as Error) }, 'proxy on_response hook not told');
    }
  }

  private enqueue(work: () => Promise<void>): void {
    if (this.queue.length >= RESPONSE_QUEUE) {
      this.dropped++;
      return;
    }
    this.queue.push(work);
    this.drain();
  }

  private drain(): void {
    while (this.working < RESPONSE_WORKERS) {
      const work = this.queue.shift();
      if (!work) break;
      this.working++;
      void work().finally(() => {
        this.working--;
        this.drain();
      });
    }
  }
}

/** What a webhook is sent: the facts without the labels (they are the sandbox's, not the request's). */
function payloadOf(facts: ProxyRequestFacts): Omit<ProxyRequestFacts, 'labels'> {
  const { labels: _labels, ...rest } = facts;
  return rest;
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function causeOf(err: Error): string {
  const cause = (err as Error & { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? err.message;
}

/**
 * A hook's match as a predicate; every field given must hold. `path_prefix` is matched against
 * the path as upstream servers read it (hook-paths.ts), `host` with its port when it names one.
 */
export function compileMatch(match: ProxyHookMatch): (facts: ProxyRequestFacts) => boolean {
  const tests: ((facts: ProxyRequestFacts) => boolean)[] = [];
  if (match.host !== undefined) {
    const host = destinationsOf([match.host]);
    tests.push((f) => targetMatches(host, f.host, f.port));
  }
  if (match.method !== undefined) tests.push((f) => f.method === match.method);
  if (match.path_prefix !== undefined) {
    const matches = pathPrefixMatcher(match.path_prefix, match.path_ignore_case === true);
    tests.push((f) => f.path !== '' && matches(f.path));
  }
  if (match.sandbox !== undefined) {
    const pattern = new RegExp(`^${match.sandbox.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*')}$`);
    tests.push((f) => pattern.test(f.sandbox));
  }
  if (match.labels !== undefined) {
    const wanted = Object.entries(match.labels);
    tests.push((f) => wanted.every(([key, value]) => f.labels[key] === value));
  }
  return (facts) => tests.every((test) => test(facts));
}
