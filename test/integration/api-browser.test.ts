import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { BROWSER_IMAGE, ensureBrowserImage, serveSite, SITE } from '../helpers/browser-site.js';

let rt: DockerRuntime;
const name = uniqueName('browser');
const api = (method: string, path: string, body?: unknown) => call(rt.url, method, path, body);
const pagePath = (page = 'default') => `/sandboxes/${name}/browser/pages/${page}`;
/** A 200 reply's bare body. */
async function ok(method: string, path: string, body?: unknown) {
  const res = await api(method, path, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}
/** The ref the snapshot gives the line that matches `pattern`. */
function refOf(snapshot: string, pattern: RegExp): string {
  const line = snapshot.split('\n').find((l) => pattern.test(l));
  const ref = line && /\[ref=(\w+)\]/.exec(line)?.[1];
  if (!ref) throw new Error(`no ref for ${pattern} in:\n${snapshot}`);
  return ref;
}

const plain = uniqueName('no-browser');

beforeAll(async () => {
  await ensureBrowserImage();
  rt = await dockerRuntime();
  expect((await api('POST', '/sandboxes', { name, image: BROWSER_IMAGE })).status).toBe(201);
  expect((await api('POST', '/sandboxes', { name: plain })).status).toBe(201);
  await serveSite(rt.url, name);
}, 600_000);
afterAll(async () => {
  await rt?.dispose();
});

describe('browser automation', () => {
  it('starts Chromium on demand', async () => {
    const body = await ok('POST', `/sandboxes/${name}/browser/start`);
    expect(body.version).toMatch(/\d+\./);
    expect(body.pages).toEqual([]);
  });

  it('snapshots a form with refs; fill and click by ref change the page', async () => {
    const opened = await ok('POST', `${pagePath()}/goto`, { url: `${SITE}/index.html` });
    expect(opened).toMatchObject({ url: `${SITE}/index.html`, title: 'Greeter' });
    expect(opened.snapshot).toMatch(/button "Greet" \[ref=e\d+\]/);
    expect(opened.snapshot).toMatch(/textbox "Your name" \[ref=e\d+\]/);
    expect(opened.refs).toContain(refOf(opened.snapshot, /button "Greet"/));

    const filled = await ok('POST', `${pagePath()}/fill`, { ref: refOf(opened.snapshot, /textbox "Your name"/), value: 'Ada' });
    const clicked = await ok('POST', `${pagePath()}/click`, { ref: refOf(filled.snapshot, /button "Greet"/) });
    expect(clicked.snapshot).toContain('Hello, Ada!');
    expect(await ok('GET', pagePath())).toMatchObject({ url: `${SITE}/index.html`, title: 'Greeter' });
  });

  it('falls back to CSS selectors', async () => {
    await ok('POST', `${pagePath()}/fill`, { selector: '#who', value: 'Grace' });
    const clicked = await ok('POST', `${pagePath()}/click`, { selector: 'button#greet' });
    expect(clicked.snapshot).toContain('Hello, Grace!');
  });

  it('evaluates expressions and reads content with its links', async () => {
    expect(await ok('POST', `${pagePath()}/evaluate`, { expression: '6 * 7' })).toEqual({ result: 42 });
    expect(await ok('POST', `${pagePath()}/evaluate`, { expression: 'document.title' })).toEqual({ result: 'Greeter' });
    const content = await ok('GET', `${pagePath()}/content`);
    expect(content.title).toBe('Greeter');
    expect(content.text).toContain('Hello, Grace!');
    expect(content.links).toEqual([{ text: 'Next page', href: `${SITE}/next.html` }]);
  });

  it('takes a PNG screenshot of the viewport', async () => {
    const shot = await ok('GET', `${pagePath()}/screenshot`);
    const png = Buffer.from(shot.data, 'base64');
    expect(png.subarray(1, 4).toString('latin1')).toBe('PNG');
    // IHDR: width and height are the first fields of the first chunk.
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([shot.width, shot.height]);
    expect([shot.width, shot.height]).toEqual([1280, 720]);
  });

  it('follows a link clicked by ref', async () => {
    const current = await ok('GET', pagePath());
    const next = await ok('POST', `${pagePath()}/click`, { ref: refOf(current.snapshot, /link "Next page"/) });
    expect(next).toMatchObject({ url: `${SITE}/next.html`, title: 'Next' });
    expect(next.snapshot).toContain('Arrived');
  });

  it('keeps named pages independent', async () => {
    await ok('POST', `${pagePath('second')}/goto`, { url: `${SITE}/index.html` });
    expect((await ok('GET', pagePath('second'))).title).toBe('Greeter');
    expect((await ok('GET', pagePath())).title).toBe('Next');
    const pages = await ok('GET', `/sandboxes/${name}/browser/pages`);
    expect(pages.map((p: { name: string }) => p.name).sort()).toEqual(['default', 'second']);
    expect(await ok('DELETE', pagePath('second'))).toEqual({ page: 'second', closed: true });
    expect((await api('GET', pagePath('second'))).status).toBe(404);
  });

  it('refuses stale refs, missing urls and bad page names', async () => {
    const stale = await api('POST', `${pagePath()}/click`, { ref: 'e999' });
    expect(stale.status).toBe(400);
    expect(stale.body.error).toMatch(/take a new snapshot/);
    expect((await api('POST', `${pagePath()}/goto`, {})).status).toBe(400);
    expect((await api('POST', `${pagePath()}/click`, {})).status).toBe(400);
    expect((await api('POST', `${pagePath('Bad Name')}/goto`, { url: SITE })).status).toBe(400);
    const missing = await api('POST', `${pagePath()}/click`, { selector: '#nothing-here' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatch(/^selector '#nothing-here' matched no usable element within 5s/);
    const unreachable = await api('POST', `${pagePath()}/goto`, { url: 'http://127.0.0.1:8001/' });
    expect(unreachable.status).toBe(400);
    expect(unreachable.body.error).toMatch(/ERR_CONNECTION_REFUSED/);
  });

  it('logs events in order, with offset and limit', async () => {
    const events = await ok('GET', `/sandboxes/${name}/browser/events`);
    expect(events.map((e: { seq: number }) => e.seq)).toEqual(events.map((_: unknown, i: number) => i));
    expect(events.slice(0, 4).map((e: { type: string }) => e.type)).toEqual(['page.created', 'page.navigated', 'page.filled', 'page.clicked']);
    expect(events.filter((e: { page: string }) => e.page === 'second').map((e: { type: string }) => e.type)).toEqual([
      'page.created',
      'page.navigated',
      'page.closed',
    ]);
    const window = await ok('GET', `/sandboxes/${name}/browser/events?offset=2&limit=3`);
    expect(window).toEqual(events.slice(2, 5));
  });

  it('answers 400 when a navigation times out (30 s)', async () => {
    // A listener that accepts connections and never answers, detached: it must outlive its request.
    const hang = 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 8002)); s.listen(); time.sleep(600)';
    expect((await api('POST', `/sandboxes/${name}/exec/detach`, { command: ['python3', '-c', hang] })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const timedOut = await api('POST', `${pagePath('slow')}/goto`, { url: 'http://127.0.0.1:8002/' });
    expect(timedOut.status).toBe(400);
    expect(timedOut.body.error).toBe('navigation to http://127.0.0.1:8002/ timed out after 30s');
  }, 60_000);

  it('relays the debugging port to the host only, not to other sandboxes', async () => {
    const record = await rt.services.sandboxes.require(name);
    const ip = (await rt.services.backend.inspect(record.backend_id!))!.ip!;
    const fromHost = await fetch(`http://${ip}:9223/json/version`);
    expect(fromHost.status).toBe(200);
    const probe = `curl -s -o /dev/null --max-time 3 http://${ip}:9223/json/version; echo $?`;
    const fromSandbox = await api('POST', `/sandboxes/${plain}/exec`, { command: ['bash', '-c', probe] });
    expect(fromSandbox.body.data.stdout.trim()).not.toBe('0');
  });

  it('answers 422 for a restrictive sandbox, saying which profiles work', async () => {
    const closed = uniqueName('browser-closed');
    expect((await api('POST', '/sandboxes', { name: closed, image: BROWSER_IMAGE, profile: 'restrictive' })).status).toBe(201);
    const refused = await api('POST', `/sandboxes/${closed}/browser/start`);
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatch(/moderate or permissive/);
    expect((await api('DELETE', `/sandboxes/${closed}`)).status).toBe(200);
  });

  it('answers 422 naming the browser image for an image without Chromium, 409 when stopped', async () => {
    const noChromium = await api('POST', `/sandboxes/${plain}/browser/pages/default/goto`, { url: SITE });
    expect(noChromium.status).toBe(422);
    expect(noChromium.body.error).toContain(BROWSER_IMAGE);
    expect((await api('POST', `/sandboxes/${plain}/stop`)).status).toBe(200);
    const stopped = await api('POST', `/sandboxes/${plain}/browser/start`);
    expect(stopped.status).toBe(409);
    expect(stopped.body.error).toMatch(/start it/);
    expect((await api('GET', `/sandboxes/${plain}/browser/events`)).body).toEqual([]);
  });

  it('recovers from a browser crash on the next call', async () => {
    const kill = await api('POST', `/sandboxes/${name}/exec`, { command: ['bash', '-c', 'kill -9 $(cat /tmp/sandboxd-chromium.pid)'] });
    expect(kill.body.data.exit_code).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const reopened = await ok('POST', `${pagePath()}/goto`, { url: `${SITE}/index.html` });
    expect(reopened.title).toBe('Greeter');
  });

  it('starts the browser again after the sandbox restarts', async () => {
    expect((await api('POST', `/sandboxes/${name}/stop`)).status).toBe(200);
    expect((await api('GET', `/sandboxes/${name}/browser/pages`)).status).toBe(409);
    expect((await api('POST', `/sandboxes/${name}/start`)).status).toBe(200);
    await serveSite(rt.url, name);
    expect((await ok('POST', `${pagePath()}/goto`, { url: `${SITE}/index.html` })).title).toBe('Greeter');
  });

  it('keeps the event log across a server restart', async () => {
    const before = await ok('GET', `/sandboxes/${name}/browser/events`);
    const chromiumPid = async () =>
      (await api('POST', `/sandboxes/${name}/exec`, { command: ['cat', '/tmp/sandboxd-chromium.pid'] })).body.data.stdout;
    const pid = await chromiumPid();
    await rt.close();
    rt = await dockerRuntime({ dataDir: rt.dataDir });
    expect(await ok('GET', `/sandboxes/${name}/browser/events`)).toEqual(before);
    // The new server connects to the browser that kept running; pages start over.
    expect(await ok('GET', `/sandboxes/${name}/browser/pages`)).toEqual([]);
    expect((await ok('POST', `${pagePath()}/goto`, { url: `${SITE}/next.html` })).title).toBe('Next');
    expect(await chromiumPid()).toBe(pid);
    const after = await ok('GET', `/sandboxes/${name}/browser/events?offset=${before.length}`);
    expect(after.map((e: { seq: number; type: string }) => [e.seq, e.type])).toEqual([
      [before.length, 'page.created'],
      [before.length + 1, 'page.navigated'],
    ]);
  });
});
