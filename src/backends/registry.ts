import type { Logger } from '../telemetry/logger.js';
import type { Backend } from './backend.js';
import { DockerBackend } from './docker/docker-backend.js';
import { FakeBackend } from './fake/fake-backend.js';

/** What every backend factory receives. */
export interface BackendContext {
  /** Id of the data directory; the backend labels and finds its instances by it. */
  instanceId: string;
  /** The data directory, for what a backend keeps on the host (the Docker agents' sockets). */
  dataDir: string;
  logger: Logger;
  pidsLimit: number;
  /** How to obtain an image the backend cannot find (for its error message). */
  imageHint: (image: string) => string;
}

/** The one place backends register: id -> factory. */
export const BACKENDS = {
  docker: (ctx: BackendContext): Backend =>
    new DockerBackend({
      instanceId: ctx.instanceId,
      dataDir: ctx.dataDir,
      logger: ctx.logger,
      pidsLimit: ctx.pidsLimit,
      imageHint: ctx.imageHint,
    }),
  /** For unit tests of the service layer and demos; never evidence that a feature works. */
  fake: (): Backend => new FakeBackend(),
} satisfies Record<string, (ctx: BackendContext) => Backend>;

export type BackendId = keyof typeof BACKENDS;

export function createBackend(id: BackendId, ctx: BackendContext): Backend {
  return BACKENDS[id](ctx);
}
