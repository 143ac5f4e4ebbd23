import type { Backend, FsEntry, FsListing, FsWatchEvent } from '../../backends/backend.js';
import { badRequest, ServiceError } from '../../errors.js';
import { requireCapability } from '../support/capabilities.js';
import { ConcurrencyLimit } from '../support/concurrency-limit.js';
import type { ServiceContext } from '../context.js';
import { sandboxPath } from './file-service.js';
import type { SandboxService } from './sandbox-service.js';

/** Watches under way at once, server-wide: each holds a connection to a sandbox's agent. */
export const MAX_WATCHES = 64;

/**
 * The path of a view: absolute (a relative one is refused, not taken from /workspace as the
 * files routes do, since a listing names what it lists), `/` included, otherwise under the
 * files routes' rules (no `..`, no NUL, the kernel's length limits).
 */
export function viewPath(raw: string): string {
  if (!raw.startsWith('/')) throw badRequest(`path: '${raw}' must be absolute, e.g. /workspace`);
  return raw.split('/').every((segment) => segment === '' || segment === '.') ? '/' : sandboxPath(raw);
}

/** Listings, stat and watches of a running sandbox's files, as its default user sees them. */
export class FsViewService {
  private readonly sandboxes: SandboxService;
  private readonly backend: Backend;
  private readonly watches = new ConcurrencyLimit(MAX_WATCHES);

  constructor(ctx: Pick<ServiceContext, 'backend'> & { sandboxes: SandboxService }) {
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
  }

  async list(name: string, rawPath: string): Promise<FsListing> {
    const path = viewPath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const listing = await requireCapability(this.backend, 'fileViews').listDirectory(sandbox.backend_id, path);
    await this.sandboxes.touch(sandbox);
    return listing;
  }

  async stat(name: string, rawPath: string): Promise<FsEntry & { path: string }> {
    const path = viewPath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const entry = await requireCapability(this.backend, 'fileViews').stat(sandbox.backend_id, path);
    await this.sandboxes.touch(sandbox);
    return { path, ...entry };
  }

  /**
   * Starts a watch: refusals (a missing path, a stopped sandbox) come before it resolves. The
   * events end when `signal` aborts, which also ends the watch inside the sandbox.
   */
  async watch(name: string, rawPath: string, options: { recursive: boolean; signal: AbortSignal }): Promise<{ path: string; events: AsyncIterable<FsWatchEvent> }> {
    const path = viewPath(rawPath);
    const sandbox = await this.sandboxes.requireRunning(name);
    const views = requireCapability(this.backend, 'fileViews');
    const release = this.watches.tryAcquire();
    if (!release) throw new ServiceError('BUSY', `${MAX_WATCHES} watches are under way: retry when one has ended`);
    try {
      const events = await views.watch(sandbox.backend_id, path, options);
      await this.sandboxes.touch(sandbox);
      return { path, events: released(events, release) };
    } catch (err) {
      release();
      throw err;
    }
  }
}

/** The events, with the watch's slot given back when they end. */
async function* released<T>(events: AsyncIterable<T>, release: () => void): AsyncGenerator<T> {
  try {
    yield* events;
  } finally {
    release();
  }
}
