import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/load-config.js';

const dir = mkdtempSync(join(tmpdir(), 'sandboxd-config-'));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({ env: {}, flags: { dataDir: dir } });
    expect(config).toMatchObject({
      host: '127.0.0.1',
      port: 18888,
      apiKeys: [],
      allowSudoExec: false,
      maxSandboxes: 0,
      tls: false,
      backend: 'docker',
      defaultImage: 'sandboxd/base:bookworm',
    });
  });

  it('layers defaults < TOML < environment < flags', () => {
    const configFile = file('layers.toml', '[server]\nport = 1111\nhost = "0.0.0.0"\n[api]\nmax_sandboxes = 3\n');
    const fromFile = loadConfig({ configFile, env: {}, flags: { dataDir: dir } });
    expect([fromFile.port, fromFile.host, fromFile.maxSandboxes]).toEqual([1111, '0.0.0.0', 3]);
    const fromEnv = loadConfig({ configFile, env: { SERVICE_PORT: '2222' }, flags: { dataDir: dir } });
    expect([fromEnv.port, fromEnv.host]).toEqual([2222, '0.0.0.0']);
    const fromFlags = loadConfig({ configFile, env: { SERVICE_PORT: '2222' }, flags: { dataDir: dir, port: '3333' } });
    expect(fromFlags.port).toBe(3333);
  });

  it('takes API keys from every source, the key file included', () => {
    const keyFile = file('keys.txt', '# ops keys\nkey-from-file-1\n\n  key-from-file-2  \n');
    const configFile = file('keys.toml', `[api]\napi_key = "key-from-toml"\napi_key_file = "${keyFile}"\nallow_sudo_exec = true\n`);
    const config = loadConfig({
      configFile,
      env: { SERVICE_API_KEY: 'key-from-env' },
      flags: { dataDir: dir, apiKeys: ['key-from-flag-a', 'key-from-flag-b'] },
    });
    expect(config.apiKeys.sort()).toEqual(
      ['key-from-env', 'key-from-file-1', 'key-from-file-2', 'key-from-flag-a', 'key-from-flag-b', 'key-from-toml'].sort(),
    );
    expect(config.allowSudoExec).toBe(true);
  });

  it.each([
    [{ env: { SERVICE_PORT: '99999' } }, /SERVICE_PORT: .*65535/],
    [{ env: { SERVICE_PORT: 'abc' } }, /SERVICE_PORT/],
    [{ flags: { maxSandboxes: '-1' } }, /--max-sandboxes/],
    [{ env: { SERVICE_ALLOW_SUDO_EXEC: 'maybe' } }, /SERVICE_ALLOW_SUDO_EXEC: 'maybe' is not a boolean/],
    [{ flags: { apiKeys: ['short'] } }, /--api-key: an API key must be at least 8 characters/],
    [{ flags: { tlsCert: '/x.pem' } }, /--tls-cert and --tls-key must be given together/],
    [{ flags: { webhookUrls: ['ftp://x'] } }, /--webhook-url: must be an http\(s\) URL/],
    [{ flags: { apiKeyFile: '/nonexistent/keys' } }, /cannot read API key file \/nonexistent\/keys/],
    [{ env: { SERVICE_WEBHOOK_URL: 'http://ok.example/hook, not a url' } }, /SERVICE_WEBHOOK_URL: must be an http\(s\) URL/],
    [{ flags: { webhookSecret: 'short' } }, /--webhook-secret: a webhook secret must be at least 16 characters/],
    [{ flags: { otelEndpoint: 'localhost:4318' } }, /--otel-endpoint: must be an http\(s\) URL/],
    [{ env: { SERVICE_EVENTS_HEARTBEAT: '0' } }, /SERVICE_EVENTS_HEARTBEAT/],
    [{ flags: { eventsBacklog: '0' } }, /--events-backlog/],
    [{ flags: { secretKeyFile: '' } }, /--secret-key-file: must name a key file/],
  ])('refuses %j with a message that says what to fix', (sources, message) => {
    expect(() => loadConfig({ env: {}, ...sources, flags: { dataDir: dir, ...('flags' in sources ? sources.flags : {}) } })).toThrow(message);
  });

  it('takes the lifecycle options from TOML, environment and flags (0 turns a loop off)', () => {
    const defaults = loadConfig({ env: {}, flags: { dataDir: dir } });
    expect([defaults.gcInterval, defaults.reconcileInterval, defaults.snapshotPrefix]).toEqual([60, 60, 'sandboxd-snapshot']);
    const configFile = file('life.toml', '[lifecycle]\ngc_interval = 0\nreconcile_interval = 300\n[sandboxes]\nsnapshot_prefix = "my/snaps"\n');
    const fromFile = loadConfig({ configFile, env: {}, flags: { dataDir: dir } });
    expect([fromFile.gcInterval, fromFile.reconcileInterval, fromFile.snapshotPrefix]).toEqual([0, 300, 'my/snaps']);
    const fromEnv = loadConfig({ configFile, env: { SERVICE_GC_INTERVAL: '30', SERVICE_SNAPSHOT_PREFIX: 'env-snaps' }, flags: { dataDir: dir, reconcileInterval: '5' } });
    expect([fromEnv.gcInterval, fromEnv.reconcileInterval, fromEnv.snapshotPrefix]).toEqual([30, 5, 'env-snaps']);
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, gcInterval: '-1' } })).toThrow(/--gc-interval/);
    expect(() => loadConfig({ env: { SERVICE_RECONCILE_INTERVAL: 'often' }, flags: { dataDir: dir } })).toThrow(/SERVICE_RECONCILE_INTERVAL/);
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, snapshotPrefix: 'Bad:Prefix' } })).toThrow(/--snapshot-prefix: must be an image repository name/);
  });

  it('names unknown TOML keys, bad TOML and a missing file', () => {
    expect(() => loadConfig({ configFile: file('u.toml', '[api]\napi_kee = "x"\n'), env: {} })).toThrow(/unknown key \[api\]\.api_kee/);
    expect(() => loadConfig({ configFile: file('b.toml', '[api\n'), env: {} })).toThrow(/not valid TOML/);
    expect(() => loadConfig({ configFile: join(dir, 'missing.toml'), env: {} })).toThrow(ConfigError);
    const typed = file('t.toml', '[api]\nallow_sudo_exec = "yes"\n');
    expect(() => loadConfig({ configFile: typed, env: {} })).toThrow(/\[api\]\.allow_sudo_exec in .*: /);
  });

  it('reads the event options from every source', () => {
    const configFile = file(
      'events.toml',
      '[events]\nwebhook_urls = ["http://127.0.0.1:9/a", "https://hooks.example/b"]\nwebhook_secret = "sixteen-chars-secret"\nbacklog = 50\n',
    );
    const config = loadConfig({ configFile, env: { SERVICE_EVENTS_HEARTBEAT: '0.5', SERVICE_OTEL_ENDPOINT: 'http://127.0.0.1:4318' }, flags: { dataDir: dir } });
    expect(config).toMatchObject({
      webhookUrls: ['http://127.0.0.1:9/a', 'https://hooks.example/b'],
      webhookSecret: 'sixteen-chars-secret',
      eventsBacklog: 50,
      eventsHeartbeat: 0.5,
      otelEndpoint: 'http://127.0.0.1:4318',
    });
    expect(loadConfig({ env: {}, flags: { dataDir: dir } })).toMatchObject({ events: false, eventsBacklog: 1000, eventsHeartbeat: 15 });
  });

  it('reads the secret key file from every source and makes it absolute', () => {
    expect(loadConfig({ env: {}, flags: { dataDir: dir } }).secretKeyFile).toBeUndefined();
    const configFile = file('secrets.toml', '[secrets]\nkey_file = "/etc/sandboxd/secret.key"\n');
    expect(loadConfig({ configFile, env: {}, flags: { dataDir: dir } }).secretKeyFile).toBe('/etc/sandboxd/secret.key');
    const env = { SERVICE_SECRET_KEY_FILE: '/run/keys/sandboxd.key' };
    expect(loadConfig({ configFile, env, flags: { dataDir: dir } }).secretKeyFile).toBe('/run/keys/sandboxd.key');
    expect(loadConfig({ configFile, env, flags: { dataDir: dir, secretKeyFile: 'keys/sandboxd.key' } }).secretKeyFile).toBe(resolve('keys/sandboxd.key'));
    const typed = file('secrets-typed.toml', '[secrets]\nkey_file = 3\n');
    expect(() => loadConfig({ configFile: typed, env: {}, flags: { dataDir: dir } })).toThrow(/\[secrets\]\.key_file in .*: /);
  });

  it('reads the store options from every source and refuses bad values by name', () => {
    expect(loadConfig({ env: {}, flags: { dataDir: dir } })).toMatchObject({ storeWorkers: 2, storeTimeout: 10_000, storeAllowedHosts: ['*'] });
    const configFile = file('stores.toml', '[stores]\nworkers = 4\ntimeout_ms = 5000\nallowed_hosts = ["db.internal", "*.example.com"]\n');
    expect(loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toMatchObject({
      storeWorkers: 4,
      storeTimeout: 5000,
      storeAllowedHosts: ['db.internal', '*.example.com'],
    });
    const env = { SERVICE_STORE_WORKERS: '3', SERVICE_STORE_ALLOWED_HOSTS: '10.0.0.*, db' };
    expect(loadConfig({ configFile, env, flags: { dataDir: dir, storeTimeout: '20000' } })).toMatchObject({
      storeWorkers: 3,
      storeTimeout: 20_000,
      storeAllowedHosts: ['10.0.0.*', 'db'],
    });
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, storeTimeout: '60001' } })).toThrow(/--store-timeout/);
    expect(() => loadConfig({ env: { SERVICE_STORE_WORKERS: '0' }, flags: { dataDir: dir } })).toThrow(/SERVICE_STORE_WORKERS/);
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, storeAllowedHosts: 'db/32' } })).toThrow(/--store-allowed-hosts: 'db\/32' is not a host glob or CIDR/);
    expect(loadConfig({ env: {}, flags: { dataDir: dir, storeAllowedHosts: '*,10.0.0.0/8,fd00::/8' } })).toMatchObject({ storeAllowedHosts: ['*', '10.0.0.0/8', 'fd00::/8'] });
  });

  it('reads the orchestration options from every source and refuses bad values by name', () => {
    expect(loadConfig({ env: {}, flags: { dataDir: dir } })).toMatchObject({ orchestrationConcurrency: 16, orchestrationRetention: '30d' });
    const configFile = file('orchestrations.toml', '[orchestrations]\nconcurrency = 4\nretention = "7d"\n');
    expect(loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toMatchObject({ orchestrationConcurrency: 4, orchestrationRetention: '7d' });
    const env = { SERVICE_ORCHESTRATION_RETENTION: '12h' };
    expect(loadConfig({ configFile, env, flags: { dataDir: dir, orchestrationConcurrency: '24' } })).toMatchObject({ orchestrationConcurrency: 24, orchestrationRetention: '12h' });
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, orchestrationRetention: 'forever' } })).toThrow(/--orchestration-retention/);
    expect(() => loadConfig({ env: { SERVICE_ORCHESTRATION_CONCURRENCY: '0' }, flags: { dataDir: dir } })).toThrow(/SERVICE_ORCHESTRATION_CONCURRENCY/);
  });

  it('reads the preview domain from every source, lower-cased, and refuses one that is no domain', () => {
    expect(loadConfig({ env: {}, flags: { dataDir: dir } })).toMatchObject({ previewDomain: 'sandbox.localhost' });
    const configFile = file('preview.toml', '[preview]\ndomain = "Preview.Example.com"\n');
    expect(loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toMatchObject({ previewDomain: 'preview.example.com' });
    expect(loadConfig({ configFile, env: { SERVICE_PREVIEW_DOMAIN: 'env.test' }, flags: { dataDir: dir } })).toMatchObject({ previewDomain: 'env.test' });
    expect(loadConfig({ env: {}, flags: { dataDir: dir, previewDomain: 'flag.test.' } })).toMatchObject({ previewDomain: 'flag.test' });
    expect(() => loadConfig({ env: {}, flags: { dataDir: dir, previewDomain: 'no domain/' } })).toThrow(/--preview-domain/);
  });

  it('turns TLS on with a certificate pair or --tls alone', () => {
    expect(loadConfig({ env: { SERVICE_TLS_CERT: '/c.pem', SERVICE_TLS_KEY: '/k.pem' }, flags: { dataDir: dir } }).tls).toBe(true);
    expect(loadConfig({ env: {}, flags: { dataDir: dir, tls: true } }).tls).toBe(true);
  });
});

describe('loadConfig: proxy port and LLM providers', () => {
  it('is off on port 18889 by default, with stream usage on', () => {
    expect(loadConfig({ env: {}, flags: { dataDir: dir } })).toMatchObject({ proxy: false, proxyPort: 18889, llmProviders: {}, llmStreamUsage: true });
  });

  it('reads [proxy], [llm] and [llm.providers.<name>] from TOML, and the env twins', () => {
    const configFile = file(
      'llm.toml',
      '[proxy]\nenabled = true\nport = 18999\n[llm]\nstream_usage = false\n[llm.providers.openai]\nbase_url = "http://127.0.0.1:9000"\n[llm.providers.groq]\nbase_url = "https://api.groq.com/openai/v1"\nauth_scheme = "Bearer"\n',
    );
    expect(loadConfig({ configFile, env: {}, flags: { dataDir: dir } })).toMatchObject({
      proxy: true,
      proxyPort: 18999,
      llmStreamUsage: false,
      llmProviders: { openai: { base_url: 'http://127.0.0.1:9000' }, groq: { base_url: 'https://api.groq.com/openai/v1', auth_scheme: 'Bearer' } },
    });
    const env = { SERVICE_PROXY: 'true', SERVICE_PROXY_PORT: '19000', SERVICE_LLM_PROVIDERS: '{"vllm": {"base_url": "http://10.0.0.5:8000/v1"}}' };
    expect(loadConfig({ env, flags: { dataDir: dir } })).toMatchObject({ proxy: true, proxyPort: 19000, llmProviders: { vllm: { base_url: 'http://10.0.0.5:8000/v1' } } });
  });

  it('names the bad setting', () => {
    expect(() => loadConfig({ env: { SERVICE_PROXY_PORT: '70000' }, flags: { dataDir: dir } })).toThrow(/SERVICE_PROXY_PORT/);
    expect(() => loadConfig({ env: { SERVICE_LLM_PROVIDERS: '{nope' }, flags: { dataDir: dir } })).toThrow(/SERVICE_LLM_PROVIDERS: must be JSON/);
    const badUrl = file('llm-bad.toml', '[llm.providers.groq]\nbase_url = "ftp://x"\n');
    expect(() => loadConfig({ configFile: badUrl, env: {}, flags: { dataDir: dir } })).toThrow(/\[llm\]\.providers in .*llm-bad\.toml: .*http\(s\) URL/);
    const badKey = file('llm-key.toml', '[llm.providers.groq]\nbase_url = "http://x"\napi_key = "sk-in-toml"\n');
    expect(() => loadConfig({ configFile: badKey, env: {}, flags: { dataDir: dir } })).toThrow(/api_key/);
  });
});

describe('serve flags', () => {
  it('every option with a flag is a flag of sandboxd serve (the docs name them)', async () => {
    const { OPTIONS } = await import('../../../src/config/config-schema.js');
    const { serveCommand } = await import('../../../src/cli/serve-command.js');
    const flags = new Set(serveCommand().options.map((option) => option.long));
    const missing = Object.values(OPTIONS)
      .map((option) => option.flag)
      .filter((flag) => flag.startsWith('--') && !flags.has(flag));
    expect(missing).toEqual([]);
  });
});

describe('environment names', () => {
  it('takes SANDBOXD_* for every setting, over SERVICE_*, and names the variable it read in an error', () => {
    const config = loadConfig({ env: { SANDBOXD_PORT: '19000', SERVICE_PORT: '19001', SERVICE_POOL_SIZE: '3', SANDBOXD_API_KEY: 'sandboxd-key-1', SERVICE_API_KEY: 'service-key-1', SANDBOXD_EVENTS: 'true' } });
    expect(config.port).toBe(19000);
    expect(config.poolSize).toBe(3);
    expect(config.apiKeys).toEqual(['sandboxd-key-1']);
    expect(config.events).toBe(true);
    expect(() => loadConfig({ env: { SANDBOXD_PORT: 'x' } })).toThrow(/SANDBOXD_PORT/);
    expect(() => loadConfig({ env: { SANDBOXD_PROXY: 'maybe' } })).toThrow(/SANDBOXD_PROXY: 'maybe' is not a boolean/);
  });
});
