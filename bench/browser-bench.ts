import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { buildImage } from '../src/images/image-builder.js';
import { DEBUG_PORT } from '../src/services/browser/browser-launch.js';
import { RELAY_PORT_OFFSET } from '../src/backends/docker/docker-relay.js';
import { del, post, type Api } from './core-bench.js';
import { json, send } from './http-client.js';
import { report, timePaired } from './stats.js';

const run = promisify(execFile);
const docker = async (...args: string[]) => (await run('docker', args)).stdout.trim();
const SITE = 'http://127.0.0.1:8000/index.html';
const PAGE =
  '<!doctype html><title>Bench</title><input id="who" aria-label="Name"><button onclick="document.title=\'clicked\'">Go</button>';
/** The page's server is a detached command: an exec's processes end with it. */
const SERVE = { command: ['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1'], workdir: '/workspace/site' };
const WAIT = 'for _ in $(seq 50); do curl -sf -o /dev/null http://127.0.0.1:8000/ && exit 0; sleep 0.1; done; exit 1';
/** Cold start of the same Chromium in the same kind of sandbox, without the service: start, load a blank page, exit. */
const PLAIN_START = 'chromium --headless --no-sandbox --disable-gpu --user-data-dir=$(mktemp -d) --dump-dom about:blank >/dev/null 2>&1';

/** A browser route, whose reply is a bare body; throws with the server's message on failure. */
async function browserCall(api: Api, method: 'GET' | 'POST', path: string, body?: unknown): Promise<any> {
  const res = await send(method, api.url + path, body as object | undefined);
  const reply = json(res) as { error?: string };
  if (res.status !== 200) throw new Error(`${path}: ${reply.error}`);
  return reply;
}

/** Serves the bench page in a sandbox and starts its browser; the sandbox's bridge address. */
async function servePage(api: Api, name: string): Promise<string> {
  const page = await send('PUT', `${api.url}/sandboxes/${name}/files/workspace/site/index.html`, { content: PAGE });
  const started = await send('POST', `${api.url}/sandboxes/${name}/exec/detach`, SERVE);
  const served = await send('POST', `${api.url}/sandboxes/${name}/exec`, { command: ['bash', '-c', WAIT] });
  if ([page, started, served].some((res) => res.status !== 200) || (json(served) as { data: { exit_code: number } }).data.exit_code !== 0) {
    throw new Error(`serving the bench page failed: ${served.body.toString('utf8')}`);
  }
  await browserCall(api, 'POST', `/sandboxes/${name}/browser/start`);
  const container = await docker('ps', '-q', '--filter', `label=sandboxd.name=${name}`);
  return docker('inspect', '-f', '{{.NetworkSettings.Networks.bridge.IPAddress}}', container);
}

/**
 * Browser automation: the first browser call (Chromium started in the sandbox) against a cold
 * Chromium run by `docker exec` in the same sandbox; then goto+snapshot, fill and click through
 * the API against the same Playwright calls made directly over the relay to a
 * browser started the same way.
 */
export async function benchBrowser(api: Api, n: number): Promise<void> {
  await buildImage('browser');
  const prefix = `bench-browser-${process.pid}`;
  const made: string[] = [];
  const sandbox = async (i: number) => {
    const name = `${prefix}-${i < 0 ? `w${-i}` : i}`;
    await post(api, '/sandboxes', { name, image: 'sandboxd/browser:bookworm' });
    made.push(name);
    return name;
  };
  try {
    const coldN = Math.max(3, Math.round(n / 4));
    const plainSandbox = await sandbox(1000);
    const container = await docker('ps', '-q', '--filter', `label=sandboxd.name=${plainSandbox}`);
    const starts: string[] = [];
    for (let i = 0; i < coldN + 1; i++) starts.push(await sandbox(i));
    const first = await timePaired(
      coldN,
      async (i) => browserCall(api, 'POST', `/sandboxes/${starts[i + 1]}/browser/start`),
      async () => docker('exec', container, 'bash', '-c', PLAIN_START),
      1,
    );
    report('browser first call (Chromium start)', first.ours, first.plain, 'docker exec cold Chromium');

    // The direct calls drive their own sandbox's browser: a second tab in the same headless
    // browser would be a background tab, whose throttled frames slow clicks down.
    const name = starts[0]!;
    const addresses = await Promise.all([name, plainSandbox].map((sandboxName) => servePage(api, sandboxName)));
    const direct = await chromium.connectOverCDP(`http://${addresses[1]}:${DEBUG_PORT + RELAY_PORT_OFFSET}`);
    const plainPage = await direct.contexts()[0]!.newPage();
    const page = `/sandboxes/${name}/browser/pages/bench`;
    try {
      const goto = await timePaired(
        n,
        () => browserCall(api, 'POST', `${page}/goto`, { url: SITE }),
        async () => {
          await plainPage.goto(SITE);
          await plainPage.ariaSnapshot({ mode: 'ai' });
        },
      );
      report('browser goto + snapshot (API)', goto.ours, goto.plain, 'Playwright over CDP, direct');
      const fill = await timePaired(
        n,
        () => browserCall(api, 'POST', `${page}/fill`, { selector: '#who', value: 'x' }),
        async () => {
          await plainPage.locator('#who').fill('x');
          await plainPage.ariaSnapshot({ mode: 'ai' });
        },
      );
      report('browser fill + snapshot (API)', fill.ours, fill.plain, 'Playwright over CDP, direct');
      const click = await timePaired(
        n,
        () => browserCall(api, 'POST', `${page}/click`, { selector: 'button' }),
        async () => {
          await plainPage.locator('button').click();
          await plainPage.ariaSnapshot({ mode: 'ai' });
        },
      );
      report('browser click + snapshot (API)', click.ours, click.plain, 'Playwright over CDP, direct');
    } finally {
      await direct.close();
    }
  } finally {
    for (const name of made) await del(api, `/sandboxes/${name}`);
  }
}
