import type { Backend, FsEntry, FsListing, FsWatchEvent } from '../../backends/backend.js';
import { ServiceError } from '../../errors.js';
import { requireCapability } from '../support/capabilities.js';
import { ConcurrencyLimit } from '../support/concurrency-limit.js';
import type { ServiceContext } from '../context.js';
import { resolvePath, sandboxPath } from './file-service.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { SandboxService } from './sandbox-service.js';

/** Watches under way at once, server-wide: each holds a connection to a sandbox's agent. */
export const MAX_WATCHES = 64;

/**
 * The path of a view: `/`, or a path resolved as the files routes resolve it (a relative one
 * under the rule of docs/files-and-volumes.md, "Paths"; no `..`, no NUL, the kernel's length
 * limits). Its form is checked before the sandbox is looked up.
 */
async function viewPath(backend: Backend, sandboxes: SandboxService, name: string, raw: string): Promise<{ sandbox: SandboxRecord & { backend_id: string }; path: string }> {
  const root = raw.startsWith('/') && raw.split('/').every((segment) => segment === '' || segment === '.');
  if (!root) sandboxPath(raw);
  const sandbox = await sandboxes.requireRunning(name);
  return { sandbox, path: root ? '/' : await resolvePath(backend, sandbox, raw) };
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
    const { sandbox, path } = await viewPath(this.backend, this.sandboxes, name, rawPath);
    const listing = await requireCapability(this.backend, 'fileViews').listDirectory(sandbox.backend_id, path);
    await this.sandboxes.touch(sandbox);
    return listing;
  }

  async stat(name: string, rawPath: string): Promise<FsEntry & { path: string }> {
    const { sandbox, path } = await viewPath(this.backend, this.sandboxes, name, rawPath);
    const entry = await requireCapability(this.backend, 'fileViews').stat(sandbox.backend_id, path);
    await this.sandboxes.touch(sandbox);
    return { path, ...entry };
  }

  /**
   * Starts a watch: refusals (a missing path, a stopped sandbox) come before it resolves. The
   * events end when `signal` aborts, which also ends the watch inside the sandbox.
   */
  async watch(name: string, rawPath: string, options: { recursive: boolean; signal: AbortSignal }): Promise<{ path: string; events: AsyncIterable<FsWatchEvent> }> {
    const { sandbox, path } = await viewPath(this.backend, this.sandboxes, name, rawPath);
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
