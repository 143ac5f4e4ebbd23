import { v7 as uuidv7 } from 'uuid';
import { writeFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Backend } from './backends/backend.js';
import { createBackend } from './backends/registry.js';
import type { Config } from './config/config-schema.js';
import { isServiceError } from './errors.js';
import { buildApp } from './http/app.js';
import type { App } from './http/route-types.js';
import { loadTls } from './http/tls.js';
import { buildHint } from './images/catalog.js';
import { VERSION } from './paths.js';
import { repeatEvery } from './services/support/background-loop.js';
import type { EgressSettings } from './services/egress/index.js';
import type { Clock } from './services/support/clock.js';
import { secretBoxFor } from './services/support/secret-box.js';
import { allMigrations } from './services/domains.js';
import { Services } from './services/services.js';
import { Replica } from './services/support/replica.js';
import { openStore } from './state/store.js';
import { installCrashGuard } from './telemetry/crash-guard.js';
import type { Logger } from './telemetry/logger.js';
import { Tracing } from './telemetry/tracing.js';

/** A running service: state, backend, services and (when listening) the HTTP app. */
export interface Runtime {
  services: Services;
  backend: Backend;
  app: App;
  /** The deployment id (see Store): every engine object of it carries the label sandboxd.instance=<id>. */
  deploymentId: string;
  /** Base URL while listening. */
  url?: string;
  close(): Promise<void>;
}

const RECOVERY_RETRY_MS = 10_000;
/** Seconds between evictions of idle pool keys and sweeps of containers no one owns. */
const POOL_EVICT_INTERVAL_S = 60;

/**
 * The composition root: opens the data directory, checks the secret key file, makes the
 * backend, wires the services, reconciles the store with the engine, starts the timers driver
 * and the gc and policy loops and builds the HTTP app. With `listen`, it serves and writes
 * `<data-dir>/server.json` so that other local tools can find the server. `clock` replaces the
 * system time (tests). With `guardProcess` (the server), an error that escapes every handler is
 * logged and counted instead of ending the process (see installCrashGuard).
 */
export async function startRuntime(
  config: Config,
  logger: Logger,
  options: {
    listen: boolean;
    clock?: Clock;
    guardProcess?: boolean;
    /** Egress settings beyond the config's (tests: a name resolver, sandboxes' egress rules). */
    egress?: Partial<EgressSettings>;
  },
): Promise<Runtime> {
  const store = await openStore(config.dataDir, allMigrations(), { databaseUrl: config.databaseUrl });
  const secrets = secretBoxFor(config.dataDir, config.secretKeyFile, logger.child({ part: 'secrets' }));
  try {
    secrets.verify();
  } catch (err) {
    await store.close();
    throw err;
  }
  const backend = createBackend(
    config.backend,
    { deploymentId: store.deploymentId, networkName: store.networkName, dataDir: config.dataDir, logger: logger.child({ part: 'backend' }), imageHint: buildHint },
    config,
  );
  const tracing = config.otelEndpoint ? new Tracing({ endpoint: config.otelEndpoint, version: VERSION }) : undefined;
  // Made first: the services label this replica's pool instances with it.
  const replicaId = uuidv7();
  let services: Services;
  try {
    services = new Services({
      config,
      store,
      backend,
      logger,
      events: {
        enabled: config.events || config.webhookUrls.length > 0 || config.otelEndpoint !== undefined,
        backlog: config.eventsBacklog,
        webhookUrls: config.webhookUrls,
        ...(config.webhookSecret ? { webhookSecret: config.webhookSecret } : {}),
      },
      ...(tracing ? { tracing } : {}),
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.egress ? { egress: options.egress } : {}),
      secrets,
      replicaId,
    });
  } catch (err) {
    // A rule file that cannot be used (PolicyFileError): nothing may stay open behind the message.
    await backend.close();
    await store.close();
    throw err;
  }

  const unguard = options.guardProcess
    ? installCrashGuard(process, logger, services.observability.metrics.uncaughtErrors)
    : () => undefined;

  // Kept permission grants in memory before any request is decided.
  await services.permissions.ready;
  let replica: Replica;
  try {
    replica = await Replica.start(store, logger.child({ part: 'replica' }), {
      id: replicaId,
      onLostLead: () => {
        if (!options.guardProcess) return;
        logger.fatal('exiting: work this replica led may be under way while another takes the lead; start it again as a follower');
        process.exit(70);
      },
    });
  } catch (err) {
    await services.close();
    await backend.close();
    await store.close();
    unguard();
    throw err;
  }
  let recoveryTimer: NodeJS.Timeout | undefined;
  // The work that must run once over all replicas: on the leader (every server on SQLite).
  const recover = async (): Promise<void> => {
    try {
      await services.recovery.reconcile();
      // A data directory from before deployment ids: its built images become this deployment's.
      await services.images.adoptLegacy();
      await services.objects.recover();
      // Image builds the stop cut: failed, and their containers and layers removed.
      await services.images.recover();
      // Only now: recovery removes every pool instance it finds, as a crash's leftovers.
      services.pool.warm();
      services.runPool.warm();
    } catch (err) {
      if (!isServiceError(err) || err.code !== 'BACKEND_UNAVAILABLE') throw err;
      logger.warn(`${err.message}; retrying in ${RECOVERY_RETRY_MS / 1000} s`);
      recoveryTimer = setTimeout(() => void recover().catch((e) => logger.error({ err: e }, 'recovery failed')), RECOVERY_RETRY_MS);
    }
  };
  const lead = async (): Promise<void> => {
    await recover();
    // Schedule runs the last process had in flight: interrupted (or an object call retried), before any new firing.
    await services.schedules.recover();
    // Stores whose sandbox a stopped server was removing: recovery finished the removal without them.
    await services.stores.recover();
  };
  /** After the replica's own start: orchestration activities cut by a stop, then the timers. */
  const leadOn = async (): Promise<void> => {
    // Orchestration activities cut by the stop: a new attempt each (or a failure); scheduled ones run.
    await services.orchestrations.recover();
    // After recovery, like the loops: due work may act on sandboxes, which recovery settles first.
    void services.timers.start();
  };
  if (replica.leading) {
    await lead();
  } else {
    // A follower warms its own pool at once: recovery is the leader's (which still removes other replicas' pool instances: docs/operations.md).
    services.pool.warm();
    services.runPool.warm();
  }
  try {
    // Before any command runs: commands of networked sandboxes are told the gateway's address.
    await services.egress.start();
    // Each running sandbox's own address rules, in a packet filter that may have lost them (a reboot).
    await services.sandboxes.networkRules.syncQuietly();
  } catch (err) {
    clearTimeout(recoveryTimer);
    await replica.close();
    await services.close();
    await backend.close();
    await store.close();
    unguard();
    throw err;
  }
  if (replica.leading) await leadOn();
  else replica.onLead(() => void lead().then(leadOn).catch((err: unknown) => logger.error({ err }, 'taking the lead failed')));
  /** A loop's work, on the leader only. */
  const leading = (work: () => Promise<unknown>) => async () => (replica.leading ? work() : undefined);
  const loops = [
    repeatEvery(config.gcInterval, leading(() => services.lifecycle.gc()), logger.child({ loop: 'gc' })),
    repeatEvery(
      config.reconcileInterval,
      leading(async () => {
        await services.lifecycle.reconcile();
        // Address rules follow addresses: also those of containers that stopped behind sandboxd's back.
        await services.sandboxes.networkRules.sync();
      }),
      logger.child({ loop: 'reconcile' }),
    ),
    repeatEvery(
      POOL_EVICT_INTERVAL_S,
      async () => {
        services.pool.evictIdle();
        services.runPool.evictIdle();
        if (replica.leading) await services.recovery.sweep((uuid) => services.pool.holds(uuid) || services.runPool.holds(uuid));
      },
      logger.child({ loop: 'pool' }),
    ),
  ];
  void backend.ensureImage(config.defaultImage).catch((err: Error) => logger.warn(`default image: ${err.message}`));

  const https = config.tls ? await loadTls({ cert: config.tlsCert, key: config.tlsKey, dataDir: config.dataDir }) : undefined;
  const app = await buildApp({
    services,
    apiKeys: config.apiKeys,
    namedKeys: config.namedKeys,
    logger,
    eventsHeartbeatMs: config.eventsHeartbeat * 1000,
    ...(https ? { https } : {}),
  });
  let url: string | undefined;
  const serverFile = join(config.dataDir, 'server.json');
  if (options.listen) {
    await app.listen({ host: config.host, port: config.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : config.port;
    const host = config.host.includes(':') ? `[${config.host}]` : config.host;
    url = `${https ? 'https' : 'http'}://${host}:${port}`;
    writeFileSync(serverFile, JSON.stringify({ url, pid: process.pid }) + '\n');
    await replica.serving(url);
    logger.info({ url, backend: backend.name, dataDir: config.dataDir, auth: config.apiKeys.length + config.namedKeys.length > 0 }, 'sandboxd listening');
  }

  return {
    services,
    backend,
    app,
    deploymentId: store.deploymentId,
    ...(url ? { url } : {}),
    async close() {
      // First: a tick in flight finishes while everything it may use is still open.
      await services.timers.close();
      clearTimeout(recoveryTimer);
      await replica.close();
      for (const stop of loops) await stop();
      await app.close();
      await services.close();
      if (options.listen) rmSync(serverFile, { force: true });
      await backend.close();
      await store.close();
      unguard();
    },
  };
}
