import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';

/** Debian's Chromium, driven by playwright-core (as the dashboard tests do). */
const CHROMIUM = '/usr/bin/chromium';
const KEY = 'preview-browser-key';
const SITE = readFileSync(join(import.meta.dirname, '../integration/fixtures/preview-site.py'), 'utf8');
/** Where each sandbox's server writes the requests that reached it. */
const LOG = '/tmp/seen.log';

let rt: DockerRuntime;
let browser: Browser;
const a = uniqueName('pva');
const b = uniqueName('pvb');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body, { authorization: `Bearer ${KEY}` });

/** Serves the site on port 8000 of `name` and waits until it answers. */
async function serveSite(name: string): Promise<void> {
  expect((await api('POST', '/sandboxes', { name })).status).toBe(201);
  expect((await api('POST', `/sandboxes/${name}/files`, { files: { '/tmp/site.py': SITE } })).status).toBe(200);
  expect((await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['python3', '/tmp/site.py', '8000', LOG] })).status).toBe(200);
  const wait = ['sh', '-c', 'for _ in $(seq 100); do curl -sf -o /dev/null http://127.0.0.1:8000/ready && exit 0; sleep 0.1; done; exit 1'];
  expect((await api('POST', `/sandboxes/${name}/exec`, { command: wait })).body.data?.exit_code).toBe(0);
}

/** What reached the server of `name`, a line per request. */
async function seenBy(name: string): Promise<string[]> {
  const read = await api('POST', `/sandboxes/${name}/exec`, { command: ['cat', LOG] });
  return String(read.body.data?.stdout ?? '').split('\n').filter(Boolean);
}

/** A signed host-form URL of port 8000 of `name`. */
async function signedUrl(name: string): Promise<string> {
  const minted = await api('POST', `/sandboxes/${name}/ports/8000/url`, { expires_in: '1h' });
  expect(minted.status).toBe(200);
  return (minted.body.data as { url: string }).url;
}

/** From the page: a credentialed POST to `url` (fetch, as a page of any origin may send one), and whether it got an answer it may read. */
const post = (page: Page, url: string) =>
  page.evaluate(async (target) => {
    try {
      const response = await fetch(target, { method: 'POST', body: 'x', credentials: 'include', mode: 'no-cors' });
      return response.type === 'opaque' ? 'sent' : `${response.status} ${await response.text()}`;
    } catch (err) {
      return `failed: ${(err as Error).message}`;
    }
  }, url);

/** From the page: a WebSocket to `url`, and its first message or how it failed. */
const openSocket = (page: Page, url: string) =>
  page.evaluate(
    (target) =>
      new Promise<string>((resolve) => {
        const socket = new WebSocket(target);
        socket.onmessage = (event) => {
          resolve(`message ${String(event.data)}`);
          socket.close();
        };
        socket.onerror = () => resolve('failed');
        socket.onclose = () => resolve('closed');
      }),
    url,
  );

beforeAll(async () => {
  rt = await dockerRuntime({ apiKeys: [KEY] });
  await serveSite(a);
  await serveSite(b);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
}, 300_000);
afterAll(async () => {
  await browser?.close();
  await rt?.dispose();
});

describe('previews in a browser: a page of one preview cannot use the cookie of another', () => {
  it("refuses the POST, the form and the WebSocket A's page sends to B with B's cookie; B's own page and links to B work", async () => {
    // One browser, as one user who opened both previews: it holds a cookie for each.
    const context = await browser.newContext();
    const page = await context.newPage();
    const toB = new URL(await signedUrl(b));
    const B = toB.origin;
    const wsB = B.replace(/^http/, 'ws');
    expect((await page.goto(toB.href))?.status()).toBe(200);
    expect((await context.cookies(B)).map((cookie) => cookie.name)).toContain('sandboxd_preview');

    // B's own page: same-origin requests carry the cookie and reach B's server.
    expect(await post(page, `${B}/poke?from=b`)).toBe('200 poked');
    expect(await openSocket(page, `${wsB}/ws?from=b`)).toBe('message hello');

    // A's page, in the same browser.
    expect((await page.goto(await signedUrl(a)))?.status()).toBe(200);
    await post(page, `${B}/poke?from=a-fetch`);
    const socketFromA = await openSocket(page, `${wsB}/ws?from=a-socket`);
    // A form on A's page posting to B: the browser navigates, and our answer is a refusal.
    const refused = page.waitForResponse((response) => response.url().startsWith(`${B}/poke?from=a-form`));
    await page.evaluate(`(() => {
      const form = document.createElement('form');
      form.method = 'POST';
      form.action = '${B}/poke?from=a-form';
      document.body.append(form);
      form.submit();
    })()`);
    const answer = await refused;
    const formAnswer = `${answer.status()} ${await answer.text()}`;

    // A link from A to B is a navigation: B's page opens with B's cookie.
    await page.goto(await signedUrl(a));
    await page.evaluate(`(() => {
      const link = document.createElement('a');
      link.href = '${B}/?from=a-link';
      link.textContent = 'to B';
      document.body.append(link);
    })()`);
    await Promise.all([page.waitForURL(`${B}/?from=a-link`), page.getByText('to B').click()]);
    expect(await page.textContent('p')).toBe('a preview');
    // And B's page still works once there.
    expect(await post(page, `${B}/poke?from=b-again`)).toBe('200 poked');

    const seen = await seenBy(b);
    // Nothing A's page sent reached B's server; what B's page sent, and the link, did.
    expect(seen.filter((line) => /from=a-(fetch|socket|form)/.test(line))).toEqual([]);
    expect(seen).toEqual(expect.arrayContaining(['POST /poke?from=b', 'WS /ws?from=b', 'GET /?from=a-link', 'POST /poke?from=b-again']));
    expect(socketFromA).not.toMatch(/^message/);
    expect(formAnswer).toMatch(/^403 .*the preview cookie is taken only from the preview's own pages/);
    await context.close();
  });
});
