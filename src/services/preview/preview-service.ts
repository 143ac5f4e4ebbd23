import type { ConfigSection } from '../../config/config-schema.js';
import { Agent } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { badRequest } from '../../errors.js';
import { DURATION_UNIT_MS, durationMs } from '../../schemas/common.js';
import type { PreviewUrl } from '../../schemas/preview-schemas.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { ServiceContext } from '../context.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import { requireCapability } from '../support/capabilities.js';
import type { Clock } from '../support/clock.js';
import { PreviewSigner, type GrantCheck } from './preview-signing.js';

/** Longest life of a signed preview URL. */
const MAX_EXPIRES_MS = 30 * DURATION_UNIT_MS.d;
/** A preview request marks its sandbox active at most this often (one stored write per sandbox). */
const TOUCH_EVERY_MS = 30_000;
/** A kept-alive connection to a port that stays unused this long is closed (a request under way is never cut by it). */
const IDLE_CONNECTION_MS = 15_000;

type Running = SandboxRecord & { backend_id: string };

/** What a preview request goes to: a running sandbox's port, and the kept-alive connections to it. */
export interface PreviewTarget {
  sandbox: Running;
  port: number;
  /** HTTP connections to the port, kept alive between requests. */
  connections: Agent;
}

/** Where the server was reached, so that a minted URL points back at it. */
export interface PreviewOrigin {
  protocol: 'http' | 'https';
  /** The Host the request came with (`127.0.0.1:18888`). */
  host: string;
}


/** A port given as text: a whole number from 1 to 65535, else BAD_REQUEST naming it. */
export function parsePort(text: string): number {
  const port = /^[0-9]{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(port >= 1 && port <= 65535)) throw badRequest(`port: '${text}' must be a number from 1 to 65535`);
  return port;
}

/**
 * Preview URLs: HTTP and WebSocket traffic to a TCP port inside a running sandbox, reached
 * through the backend's `ports` capability (the Docker backend: through the sandbox's agent,
 * which dials the sandbox's loopback, so servers bound to 127.0.0.1 and sandboxes without a
 * network are reached alike). Signed, expiring grants let a URL work without the API key.
 */
export class PreviewService {
  /** The domain of the host form `<port>-<name>.<domain>`. */
  readonly domain: string;
  private readonly sandboxes: SandboxesApi;
  private readonly backend: ServiceContext['backend'];
  private readonly clock: Clock;
  private readonly signer: PreviewSigner;
  /** Kept-alive connections per `<uuid>:<port>`. */
  private readonly pools = new Map<string, Agent>();
  private readonly touched = new Map<string, number>();
  /**
   * Connections of exchanges under way, per sandbox uuid: clients' connections with a request to
   * the sandbox in flight, and those of relayed upgrades (WebSockets). Closed with their sandbox.
   */
  private readonly held = new Map<string, Set<Duplex>>();

  constructor(ctx: Pick<ServiceContext, 'sandboxes' | 'backend' | 'secrets' | 'clock' | 'bus'> & { config: ConfigSection<'preview'> }) {
    // The schema lowercases it and trims its dots.
    this.domain = ctx.config.previewDomain;
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.clock = ctx.clock;
    this.signer = new PreviewSigner(ctx.secrets);
    // A sandbox that stops or goes away takes its connections with it.
    ctx.bus.subscribe(({ event }) => {
      if (['sandbox.stopped', 'sandbox.archived', 'sandbox.deleted'].includes(event.type) && event.sandbox_uuid) this.drop(event.sandbox_uuid);
    });
  }

  /**
   * The sandbox name and port text of a preview Host header (`<port>-<name>.<domain>`, any
   * server port after it); undefined for any other host.
   */
  hostTarget(host: string | undefined): { name: string; port: string } | undefined {
    if (!host) return undefined;
    const hostname = host.toLowerCase().replace(/:[0-9]*$/, '');
    const suffix = `.${this.domain}`;
    if (!hostname.endsWith(suffix)) return undefined;
    const [, port, name] = /^([0-9]+)-(.+)$/.exec(hostname.slice(0, -suffix.length)) ?? [];
    return port !== undefined && name !== undefined ? { port, name } : undefined;
  }

  /** The running sandbox and port a request goes to: 400 bad port, 404 unknown, 409 not running, 422 no `ports` capability. */
  async target(name: string, portText: string): Promise<PreviewTarget> {
    const port = parsePort(portText);
    const sandbox = this.sandboxes.assertRunning(await this.sandboxes.require(name));
    requireCapability(this.backend, 'ports');
    await this.touch(sandbox);
    return { sandbox, port, connections: this.pool(sandbox, port) };
  }

  /**
   * A fresh connection to the target's port, for a WebSocket upgrade to keep for itself; it is
   * closed when the sandbox stops or goes away, and when the service closes.
   */
  async connect(target: PreviewTarget): Promise<Duplex> {
    const connection = await requireCapability(this.backend, 'ports').connectPort(target.sandbox.backend_id, target.port);
    this.hold(target, connection);
    return connection;
  }

  /**
   * Holds a connection while an exchange with the target's sandbox is under way: it is destroyed
   * when the sandbox stops or goes away and when the service closes, unless the returned release
   * comes first (or the connection closes).
   */
  hold(target: PreviewTarget, connection: Duplex): () => void {
    const uuid = target.sandbox.uuid;
    const held = this.held.get(uuid) ?? new Set<Duplex>();
    this.held.set(uuid, held);
    held.add(connection);
    const release = () => {
      connection.off('close', release);
      held.delete(connection);
      if (held.size === 0 && this.held.get(uuid) === held) this.held.delete(uuid);
    };
    connection.once('close', release);
    return release;
  }

  /** Mints a signed URL to `port` of sandbox `name`, valid for `expiresIn` (a duration, at most 30d). */
  async mint(name: string, portText: string, expiresIn: string, origin: PreviewOrigin): Promise<PreviewUrl> {
    const port = parsePort(portText);
    const ms = durationMs(expiresIn);
    if (ms === undefined || ms > MAX_EXPIRES_MS) throw badRequest(`expires_in: '${expiresIn}' must be a duration like 30m, 1h or 1d, at most 30d`);
    const sandbox = await this.sandboxes.require(name);
    const exp = Math.floor((this.clock().getTime() + ms) / 1000);
    const query = `exp=${exp}&sig=${this.signer.sign(sandbox.uuid, port, exp)}`;
    const serverPort = /:([0-9]+)$/.exec(origin.host)?.[1];
    return {
      url: `${origin.protocol}://${port}-${sandbox.name}.${this.domain}${serverPort ? `:${serverPort}` : ''}/?${query}`,
      path_url: `${origin.protocol}://${origin.host}/sandboxes/${sandbox.name}/ports/${port}/?${query}`,
      expires_at: new Date(exp * 1000).toISOString(),
    };
  }

  /**
   * Checks a presented grant for `port` of sandbox `name`. An unknown sandbox or a malformed
   * port reads as `invalid`: a request without a key learns nothing of what exists.
   */
  async checkGrant(name: string, portText: string, exp: string, sig: string): Promise<GrantCheck> {
    const sandbox = await this.sandboxes.require(name).catch(() => undefined);
    let port: number;
    try {
      port = parsePort(portText);
    } catch {
      return 'invalid';
    }
    if (!sandbox) return 'invalid';
    return this.signer.check(sandbox.uuid, port, exp, sig, Math.floor(this.clock().getTime() / 1000));
  }

  /** Closes every kept-alive connection, every client's connection with an exchange under way and every relayed upgrade. */
  close(): void {
    for (const pool of this.pools.values()) pool.destroy();
    this.pools.clear();
    for (const uuid of [...this.held.keys()]) this.drop(uuid);
  }

  private pool(sandbox: Running, port: number): Agent {
    const key = `${sandbox.uuid}:${port}`;
    let pool = this.pools.get(key);
    if (!pool) {
      pool = new Agent({ keepAlive: true, timeout: IDLE_CONNECTION_MS });
      const backendId = sandbox.backend_id;
      const create = (_options: unknown, done: (err: Error | null, socket?: Socket) => void): undefined => {
        requireCapability(this.backend, 'ports')
          .connectPort(backendId, port)
          .then(
            (socket) => done(null, socket as Socket),
            (err: Error) => done(err),
          );
        return undefined;
      };
      Object.assign(pool, { createConnection: create });
      this.pools.set(key, pool);
    }
    return pool;
  }

  private drop(uuid: string): void {
    for (const [key, pool] of this.pools) {
      if (key.startsWith(`${uuid}:`)) {
        pool.destroy();
        this.pools.delete(key);
      }
    }
    this.touched.delete(uuid);
    for (const connection of this.held.get(uuid) ?? []) connection.destroy();
    this.held.delete(uuid);
  }

  private async touch(sandbox: Running): Promise<void> {
    const now = this.clock().getTime();
    if (now - (this.touched.get(sandbox.uuid) ?? 0) < TOUCH_EVERY_MS) return;
    this.touched.set(sandbox.uuid, now);
    await this.sandboxes.touch(sandbox);
  }
}
