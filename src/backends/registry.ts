import { z } from 'zod';
import type { BackendId } from '../domain/backend-ids.js';
import type { Logger } from '../telemetry/logger.js';
import type { Backend } from './backend.js';
import { DockerBackend } from './docker/docker-backend.js';
import { FakeBackend } from './fake/fake-backend.js';

export type { BackendId };

/** What every backend factory receives from the service, besides its own options. */
export interface BackendContext {
  /** The deployment id (see Store): the backend labels, names and finds its engine objects by it. */
  deploymentId: string;
  /** The deployment's network name, where the configuration names none (`--network-name`). */
  networkName: string;
  /** The data directory, for what a backend keeps on the host (the Docker agents' sockets). */
  dataDir: string;
  logger: Logger;
  /** How to obtain an image the backend cannot find (for its error message). */
  imageHint: (image: string) => string;
}

/**
 * One backend in the registry: the schema of the options it reads from the server's
 * configuration (a zod object picks its keys out of the whole configuration, with their
 * defaults), and the factory that makes it from them.
 */
export interface BackendEntry<S extends z.ZodType = z.ZodType> {
  configSchema: S;
  factory(ctx: BackendContext, options: z.output<S>): Backend;
}

const entry = <S extends z.ZodType>(value: BackendEntry<S>): BackendEntry<S> => value;

/** The one place backends register: id -> {configSchema, factory}. */
export const BACKENDS = {
  docker: entry({
    configSchema: z.object({
      /** Most processes one sandbox may hold (`--pids-limit`). */
      pidsLimit: z.number().int().min(16).default(512),
      /** Hosts, addresses and ranges a source_url may reach although not public (`--source-allowed-hosts`). */
      sourceAllowedHosts: z.array(z.string()).default([]),
      /** sandboxd's networks and packet-filter chains are named from it (`--network-name`; else the deployment's). */
      networkName: z.string().optional(),
    }),
    factory: (ctx, options) =>
      new DockerBackend({
        instanceId: ctx.deploymentId,
        dataDir: ctx.dataDir,
        logger: ctx.logger,
        pidsLimit: options.pidsLimit,
        sourceAllowedHosts: options.sourceAllowedHosts,
        networkName: options.networkName ?? ctx.networkName,
        imageHint: ctx.imageHint,
      }),
  }),
  /** For unit tests of the service layer and demos; never evidence that a feature works. */
  fake: entry({ configSchema: z.object({}), factory: () => new FakeBackend() }),
} satisfies Record<BackendId, BackendEntry>;

/** A backend's options that do not fit its schema. */
export class BackendConfigError extends Error {
  override readonly name = 'BackendConfigError';
}

/**
 * Makes the backend `id` from the server's configuration: its entry's schema takes the options
 * it reads (BackendConfigError naming each one that does not fit), then its factory runs.
 */
export function createBackend(id: BackendId, ctx: BackendContext, config: Record<string, unknown>): Backend {
  const registered: BackendEntry = BACKENDS[id];
  const options = registered.configSchema.safeParse(config);
  if (!options.success) {
    const problems = options.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new BackendConfigError(`invalid configuration for the ${id} backend:\n  ${problems.join('\n  ')}`);
  }
  return registered.factory(ctx, options.data);
}
