import { afterEach, describe, expect, it } from 'vitest';
import { BrowserEventRepository } from '../../../../src/state/browser-event-repository.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const inject = (method: 'GET' | 'POST', url: string, payload?: object) => h.app.inject({ method, url, ...(payload ? { payload } : {}) });

/** What the browser routes decide before any browser is involved (fake backend: no browser). */
describe('browser routes (fake backend)', () => {
  it('validates input, answers 409 for a stopped sandbox and 422 where the backend has no browser', async () => {
    h = await fakeHarness();
    expect((await inject('POST', '/sandboxes', { name: 'a' })).statusCode).toBe(201);

    const noUrl = await inject('POST', '/sandboxes/a/browser/pages/default/goto', {});
    expect(noUrl.statusCode).toBe(400);
    expect(noUrl.json().error).toMatch(/url/);
    expect((await inject('POST', '/sandboxes/a/browser/pages/default/goto', { url: 'not a url' })).statusCode).toBe(400);
    expect((await inject('POST', '/sandboxes/a/browser/pages/Bad%20Page/goto', { url: 'http://127.0.0.1/' })).statusCode).toBe(400);
    const noTarget = await inject('POST', '/sandboxes/a/browser/pages/default/click', {});
    expect(noTarget.statusCode).toBe(400);
    expect(noTarget.json().error).toMatch(/ref .*or selector/);
    expect((await inject('POST', '/sandboxes/a/browser/pages/default/fill', { ref: 'e1' })).statusCode).toBe(400);
    expect((await inject('GET', '/sandboxes/a/browser/events?limit=0')).statusCode).toBe(400);

    const unsupported = await inject('POST', '/sandboxes/a/browser/start');
    expect(unsupported.statusCode).toBe(422);
    expect(unsupported.json()).toMatchObject({ success: false, code: 'UNSUPPORTED' });
    expect((await inject('GET', '/sandboxes/a/browser/events')).json()).toEqual([]);
    expect((await inject('GET', '/sandboxes/nope/browser/events')).statusCode).toBe(404);

    expect((await inject('POST', '/sandboxes/a/stop')).statusCode).toBe(200);
    const stopped = await inject('GET', '/sandboxes/a/browser/pages');
    expect(stopped.statusCode).toBe(409);
    expect(stopped.json().error).toMatch(/start it with POST \/sandboxes\/a\/start/);
  });

  it('numbers events per sandbox from 0 and forgets them when the sandbox is removed', async () => {
    h = await fakeHarness();
    expect((await inject('POST', '/sandboxes', { name: 'a' })).statusCode).toBe(201);
    const { uuid } = await h.services.sandboxes.require('a');
    const repo = new BrowserEventRepository(h.store.db);
    const ts = new Date().toISOString();
    await Promise.all(['page.created', 'page.navigated', 'page.closed'].map((type) => repo.append(uuid, { type, page: 'p', ts })));
    await repo.append('other-sandbox', { type: 'page.created', page: 'p', ts });
    const events = (await inject('GET', '/sandboxes/a/browser/events?offset=1')).json();
    expect(events.map((e: { seq: number }) => e.seq)).toEqual([1, 2]);
    expect((await h.app.inject({ method: 'DELETE', url: '/sandboxes/a' })).statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await repo.list(uuid, 0, 100)).toEqual([]);
    expect(await repo.list('other-sandbox', 0, 100)).toHaveLength(1);
  });
});
