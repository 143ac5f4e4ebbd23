import { Command, Option } from 'commander';
import { BACKEND_IDS } from '../domain/backend-ids.js';
import { collect, configFromOptions, fail } from './cli-config.js';

/** Flags of `serve`; each has a SERVICE_* twin (see README) and a TOML key. */
export function serveCommand(): Command {
  return new Command('serve')
    .description('serve the HTTP/JSON API (default 127.0.0.1:18888)')
    .option('--config <file>', 'TOML configuration file')
    .option('--host <address>', 'bind address (SERVICE_HOST)')
    .option('--port <port>', 'listen port (SERVICE_PORT)')
    .option('--data-dir <dir>', 'state directory (SERVICE_DATA_DIR)')
    .option('--database-url <url>', "postgres://...: every table in that PostgreSQL database, which replicas share (default: SQLite in the data directory)")
    .option('--api-key <key>', 'an accepted API key; repeatable (SERVICE_API_KEY)', collect)
    .option('--api-key-file <file>', 'file of keys, one per line, # comments')
    .option('--tls', 'serve HTTPS; without --tls-cert/--tls-key a self-signed certificate is kept in the data directory')
    .option('--tls-cert <file>', 'TLS certificate, PEM (SERVICE_TLS_CERT)')
    .option('--tls-key <file>', 'TLS private key, PEM (SERVICE_TLS_KEY)')
    .option('--allow-sudo-exec', 'accept exec requests with sudo: true ([api].allow_sudo_exec)')
    .option('--max-sandboxes <n>', 'most sandboxes that may exist at once, 0 = unlimited')
    .option('--batch-concurrency <n>', 'most commands of one POST /batch/run that run at once (default 4)')
    .option('--image-detection <table>', 'program=image entries for runs that name no image, e.g. python=my/python:3')
    .option('--build-concurrency <n>', 'image builds from a Dockerfile running at once; one more is refused with 429 (default 2)')
    .option('--build-pids-limit <n>', 'most processes the steps of one image build may hold at once (default 512)')
    .option('--build-cpu-shares <n>', "CPU weight of image build steps against a sandbox's 1024 (default 512)")
    .option('--build-step-disk-mb <mb>', 'MiB one step of an image build may write; past it the build stops (default 1024)')
    .option('--build-disk-mb <mb>', 'MiB all the steps of one image build may write together (default 2048)')
    .option('--pool-size <n>', 'ready pool instances kept per (image, profile) for fast runs and creates, 0 = none (default 2)')
    .option('--pool-sizes <table>', 'image[@profile]=n entries, warmed at start, e.g. sandboxd/python:bookworm=4')
    .option('--object-concurrency <n>', 'durable-object calls running at once, over all objects (default 16)')
    .option('--object-max-storage <bytes>', "storage limit of an object whose class sets none (default 4194304, at most 16 MiB)")
    .option('--orchestration-concurrency <n>', 'orchestration activities running at once, over all instances (default 16)')
    .option('--orchestration-retention <duration>', 'how long finished orchestration instances are kept, e.g. 30d, 12h (default 30d)')
    .option('--orchestration-max-steps <n>', 'steps one orchestration instance may run, map items and containers included (default 10000)')
    .option('--orchestration-max-history-events <n>', 'history events one orchestration instance may keep (default 10000)')
    .option('--orchestration-max-output-bytes <bytes>', "bytes of JSON the step outputs of one orchestration instance may hold (default 8388608)")
    .option('--store-workers <n>', 'child processes that run the SQL of host sqlite stores (default 2)')
    .option('--store-timeout <ms>', 'default timeout_ms of store queries, executes and commands (default 10000, at most 60000)')
    .option('--store-allowed-hosts <globs>', 'hosts postgres, mysql and redis stores may connect to, comma-separated globs and CIDRs (default *: public hosts; an internal address only when named)')
    .option('--pool-memory-mb <mb>', 'memory that warm instances may hold in all, 16 MiB each; pools grow with demand up to it (default 8192)')
    .addOption(new Option('--backend <name>', 'isolation backend').choices(BACKEND_IDS))
    .option('--default-image <image>', 'image of sandboxes that name none')
    .option('--pids-limit <n>', 'process limit of every sandbox')
    .option('--source-allowed-hosts <list>', 'hosts, addresses and CIDR ranges a source_url may reach although not public, comma-separated (SERVICE_SOURCE_ALLOWED_HOSTS)')
    .option('--network-name <name>', "name of sandboxd's Docker networks and packet-filter chains (default: the deployment's own, sd<id>)")
    .option('--snapshot-prefix <repo>', 'repository of snapshot image tags, default sandboxd-snapshot (each deployment tags under <repo>/<deployment id>)')
    .option('--gc-interval <seconds>', 'seconds between removals of expired sandboxes, 0 = never (default 60)')
    .option('--reconcile-interval <seconds>', 'seconds between lifecycle policy runs, 0 = never (default 60)')
    .option('--events', 'turn the event bus on without a webhook or OTLP endpoint')
    .option('--webhook-url <url>', 'URL that receives POSTed events; repeatable', collect)
    .option('--webhook-secret <secret>', 'signs webhook bodies: X-Sandboxd-Signature: sha256=<HMAC> (SERVICE_WEBHOOK_SECRET)')
    .option('--events-backlog <n>', 'events kept for Last-Event-ID resume of GET /events (1000)')
    .option('--events-heartbeat <seconds>', 'heartbeat comment interval of GET /events (15)')
    .option('--otel-endpoint <url>', 'OTLP/HTTP collector for trace export, e.g. http://127.0.0.1:4318')
    .option('--secret-key-file <file>', '32-byte key that encrypts secrets at rest, mode 0600 (default <data-dir>/secret.key, made on first use)')
    .option('--proxy', 'serve the proxy port (the LLM gateway) on the address sandboxes reach the host at ([proxy].enabled)')
    .option('--proxy-port <port>', 'port of the LLM gateway and egress proxy (default 18889)')
    .option('--proxy-upstream-ca-file <file>', 'PEM file of CA certificates the egress proxy trusts for upstreams where it terminates TLS for a secret, besides the public roots')
    .option('--preview-domain <domain>', 'domain of preview URLs <port>-<sandbox>.<domain> on the API port (default sandbox.localhost)')
    .option('--policy-file <file>', 'policy rules, TOML or JSON by extension; reloaded by POST /policy/reload ([policy].file)')
    .addOption(new Option('--policy-mode <mode>', 'enforce: denials answer 403; audit: they are logged and let through ([policy].mode)').choices(['enforce', 'audit']))
    .option('--policy-audit-allows', 'write allowed requests to the policy audit ring too ([policy].audit_allows)')
    .option('--log-format <format>', 'pretty (readable lines), json, or auto: pretty when stderr is a terminal (default)')
    .option('--log-level <level>', 'fatal, error, warn, info, debug, trace or silent')
    .action(async (opts: Record<string, unknown>) => {
      const config = configFromOptions(opts);
      if (!config) return;
      // Loaded here, not at the top: the client commands start without the service's modules.
      const [{ startRuntime }, { SecretKeyError }, { DataDirLockedError }, { DatabaseNewerError }, { DatabaseUnreachableError }, { createLogger }, { PolicyFileError }, { ProxyStartError }] = await Promise.all([
        import('../runtime.js'),
        import('../services/support/secret-box.js'),
        import('../state/data-dir-lock.js'),
        import('../state/migration-state.js'),
        import('../state/postgres.js'),
        import('../telemetry/logger.js'),
        import('../services/governance/index.js'),
        import('../services/egress/index.js'),
      ]);
      const logger = createLogger(config.logLevel, undefined, config.logFormat);
      let runtime;
      try {
        runtime = await startRuntime(config, logger, { listen: true, guardProcess: true });
      } catch (err) {
        if (err instanceof DataDirLockedError || err instanceof DatabaseNewerError || err instanceof DatabaseUnreachableError || err instanceof SecretKeyError || err instanceof ProxyStartError || err instanceof PolicyFileError) return fail(err.message);
        if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') return fail(`port ${config.port} on ${config.host} is in use: choose another with --port`);
        throw err;
      }
      let closing = false;
      const shutdown = (signal: string) => {
        if (closing) return;
        closing = true;
        logger.info(`${signal}: shutting down`);
        void runtime.close().finally(() => process.exit(0));
      };
      process.once('SIGINT', () => shutdown('SIGINT'));
      process.once('SIGTERM', () => shutdown('SIGTERM'));
    });
}
