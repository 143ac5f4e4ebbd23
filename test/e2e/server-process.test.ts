import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { runCli, startServer } from '../helpers/server-process.js';

const dirs: string[] = [];
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-e2e-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('sandboxd serve', () => {
  it('serves the API with keys from flags, environment, config file and key file', async () => {
    const dir = dataDir();
    const keyFile = join(dir, 'keys');
    writeFileSync(keyFile, '# comment\nkey-from-file-1\n');
    const configFile = join(dir, 'config.toml');
    writeFileSync(configFile, '[api]\napi_key = "key-from-toml"\n');
    const server = await startServer(dir, ['--config', configFile, '--api-key', 'key-from-flag', '--api-key-file', keyFile], {
      SERVICE_API_KEY: 'key-from-env',
    });
    try {
      expect((await call(server.url, 'GET', '/status')).body.data).toMatchObject({ api_key_configured: true, backend: 'docker' });
      expect((await call(server.url, 'GET', '/stats')).status).toBe(401);
      for (const key of ['key-from-flag', 'key-from-env', 'key-from-toml', 'key-from-file-1']) {
        const stats = await call(server.url, 'GET', '/stats', undefined, { authorization: `Bearer ${key}` });
        expect(stats.status, key).toBe(200);
        expect(stats.body.data).toMatchObject({ backend: 'docker', sandbox_limit: 0 });
        expect(stats.body.data.resource_usage.memory_total_mb).toBeGreaterThan(0);
      }
    } finally {
      await server.stop();
    }
  });

  it('refuses a second server on the same data directory, and releases the lock when killed', async () => {
    const dir = dataDir();
    const first = await startServer(dir);
    const second = await runCli(['serve', '--data-dir', dir, '--port', '0']);
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`data directory ${dir} is in use by another sandboxd process (pid ${first.child.pid})`);
    await first.kill9();
    const third = await startServer(dir);
    await third.stop();
  });

  it('stops on invalid configuration with a message that says what to fix', async () => {
    const dir = dataDir();
    const bad = await runCli(['serve', '--data-dir', dir, '--port', '70000']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--port: Too big');
    const configFile = join(dir, 'bad.toml');
    writeFileSync(configFile, '[api]\nallow_sudo = true\n');
    const unknown = await runCli(['serve', '--data-dir', dir, '--config', configFile]);
    expect(unknown.stderr).toContain('unknown key [api].allow_sudo');
    const env = await runCli(['serve', '--data-dir', dir], { SERVICE_MAX_SANDBOXES: 'many' });
    expect(env.stderr).toContain('SERVICE_MAX_SANDBOXES');
  });

  it('refuses a secret key file it cannot trust, saying what to fix', async () => {
    const dir = dataDir();
    const keyFile = join(dataDir(), 'sandboxd.key');
    writeFileSync(keyFile, Buffer.alloc(32, 5), { mode: 0o644 });
    chmodSync(keyFile, 0o644);
    const open = await runCli(['serve', '--data-dir', dir, '--port', '0', '--secret-key-file', keyFile]);
    expect(open.code).toBe(2);
    expect(open.stderr).toContain(`sandboxd: secret key file ${keyFile} is open to group or others (mode 644): run chmod 600 ${keyFile}`);
    const missing = await runCli(['serve', '--data-dir', dir, '--port', '0'], { SERVICE_SECRET_KEY_FILE: join(dir, 'typo.key') });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`secret key file ${join(dir, 'typo.key')} does not exist`);
  });

  it('serves HTTPS with a self-signed certificate kept in the data directory', async () => {
    const dir = dataDir();
    const server = await startServer(dir, ['--tls']);
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const cert = readFileSync(join(dir, 'tls', 'cert.pem'), 'utf8');
    const get = () =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = httpsRequest(`${server.url}/health`, { ca: cert }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end();
      });
    expect(await get()).toEqual({ status: 200, body: '{"status":"ok","success":true,"data":"ok"}' });
    await server.stop();
    const again = await startServer(dir, ['--tls']);
    expect(readFileSync(join(dir, 'tls', 'cert.pem'), 'utf8')).toBe(cert);
    await again.stop();
  });
});
