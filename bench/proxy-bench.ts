import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeBackend } from '../src/backends/fake/fake-backend.js';
import { defaultConfig } from '../src/config/config-schema.js';
import { Services } from '../src/services/services.js';
import { openStore } from '../src/state/store.js';
import { silentLogger } from '../src/telemetry/logger.js';
import { report, summarize, timePaired } from './stats.js';

/** A local server answering every request with a small body at once (the upstream, and the hook's webhook). */
async function listen(answer: string): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(answer) });
      res.end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const agent = new Agent({ keepAlive: true });

/** One GET, to `url` directly, or through the proxy at `proxy` as an absolute-form request. */
function get(url: string, proxy?: { host: string; port: number; auth: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    const options = proxy
      ? { host: proxy.host, port: proxy.port, path: url, headers: { 'proxy-authorization': proxy.auth }, agent }
      : { ...new URL(url), host: new URL(url).hostname, port: new URL(url).port, path: new URL(url).pathname, agent };
    const req = httpRequest(options, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * The egress proxy (BENCH_ONLY=proxy), in this process over the fake backend: a GET through
 * the proxy against the same GET straight to a local upstream (target: overhead p50 <= 3 ms),
 * and the same proxied GET with an `on_request` webhook hook against none (the hook's decision
 * latency; target p50 < 5 ms). The sandbox's rules allow the loopback upstream by CIDR.
 */
export async function benchProxy(n: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-bench-proxy-'));
  const store = await openStore(dataDir);
  const services = new Services({
    config: defaultConfig({ dataDir, poolSize: 0 }),
    egress: { host: '127.0.0.1', port: 0, enabled: true, egressOf: () => ({ egress: 'open', allow: ['127.0.0.1'], deny: [] }) },
    store,
    backend: new FakeBackend(),
    logger: silentLogger(),
  });
  const upstream = await listen('{"ok":true}');
  const webhook = await listen('{"action":"allow"}');
  try {
    await services.egress.start();
    const sandbox = await services.sandboxes.create({ name: 'bench-proxy' });
    const { hostname, port } = new URL(services.egress.url!);
    const proxy = { host: hostname, port: Number(port), auth: `Basic ${Buffer.from(`sbx:${services.egress.tokens.mint(sandbox.uuid)}`).toString('base64')}` };
    process.stdout.write(`sandboxd bench (proxy, in-process, fake backend): n=${n}; figures taken on a loaded machine\n`);
    const plain = await timePaired(n, () => get(`${upstream.url}/x`, proxy), () => get(`${upstream.url}/x`), 20);
    report('GET through the egress proxy', plain.ours, plain.plain, 'straight to the upstream');
    services.egress.hooks.create({ name: 'bench-ask', event: 'on_request', target: { type: 'webhook', url: webhook.url, timeout_ms: 2000, fail: 'closed' } });
    const hooked = await timePaired(n, () => get(`${upstream.url}/x`, proxy), () => get(`${upstream.url}/x`), 20);
    report('GET via proxy + webhook hook', hooked.ours, hooked.plain, 'straight to the upstream');
    // The hook's decision alone: one webhook round trip, as the proxy makes it.
    const facts = { timestamp: '', sandbox: 'bench-proxy', sandbox_uuid: sandbox.uuid, labels: {}, method: 'GET', url: `${upstream.url}/x`, host: '127.0.0.1', port: 0, path: '/x', headers: {} };
    const decisions: number[] = [];
    for (let i = 0; i < n + 20; i++) {
      const started = performance.now();
      await services.egress.hooks.onRequest(facts);
      if (i >= 20) decisions.push(performance.now() - started);
    }
    const d = summarize(decisions);
    process.stdout.write(`${'webhook hook decision (local webhook)'.padEnd(40)} p50 ${d.p50.toFixed(2)} ms  p95 ${d.p95.toFixed(2)} ms  (target p50 < 5 ms)\n`);
  } finally {
    agent.destroy();
    upstream.server.close();
    webhook.server.close();
    await services.close();
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
