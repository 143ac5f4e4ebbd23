import { afterEach, describe, expect, it } from 'vitest';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

/** zod's own wording, which never reaches a client. */
const ZOD_WORDING = /Invalid input|expected [a-z]+, received|Too (small|big)|Invalid (string|option|element|key)|Unrecognized key/;

describe('validation messages', () => {
  it('say what is wrong in the words of this API, never in zod\'s', async () => {
    h = await fakeHarness();
    await h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'box' } });
    const cases: Array<[string, string, unknown, string]> = [
      ['POST', '/sandboxes', [1, 2], 'body: must be a JSON object'],
      ['POST', '/sandboxes', 'just text', 'body: must be a JSON object'],
      ['POST', '/sandboxes', 42, 'body: must be a JSON object'],
      ['POST', '/sandboxes', { name: 'x', description: 5 }, 'description: must be a string'],
      ['POST', '/sandboxes', { name: 'x', description: 'd'.repeat(1025) }, 'description: must hold at most 1024 characters'],
      ['POST', '/sandboxes', { name: 'x', vcpus: 0 }, 'vcpus: must be at least 1'],
      ['POST', '/sandboxes', { name: 'x', lifecycle: { auto_stop_after_seconds: -1 } }, 'lifecycle.auto_stop_after_seconds: must be greater than 0'],
      ['POST', '/sandboxes', { name: 'x', lifecycle: [] }, 'lifecycle: must be a JSON object'],
      ['POST', '/sandboxes/box/exec', [], 'body: must be a JSON object'],
      ['POST', '/sandboxes/box/exec', { command: ['x'], timeout_ms: 1.5 }, 'timeout_ms: must be an integer'],
      ['POST', '/sandboxes/box/exec', { command: ['x'], sudo: 'yes' }, 'sudo: must be a boolean'],
      ['POST', '/sandboxes/box/exec', { command: ['x'], stdin: {} }, 'stdin: must be a string'],
      ['POST', '/run', { command: ['x'], fast: 1 }, 'fast: must be a boolean'],
      ['POST', '/batch/run', { commands: {} }, 'commands: must be an array'],
      ['POST', '/batch/run', { commands: [] }, 'commands: must hold at least one command'],
      ['PATCH', '/sandboxes/box', { description: null }, 'description: must be a string'],
    ];
    for (const [method, url, payload, expected] of cases) {
      const res = await h.app.inject({ method: method as 'POST', url, payload: JSON.stringify(payload), headers: { 'content-type': 'application/json' } });
      expect(res.statusCode, `${url} ${JSON.stringify(payload).slice(0, 60)}`).toBe(400);
      expect(res.json().error, `${url} ${JSON.stringify(payload).slice(0, 60)}`).toBe(expected);
      expect(res.json().error).not.toMatch(ZOD_WORDING);
    }
  });

  it('tells a form body what it sent and what is expected; JSON under a form type still works (curl -d)', async () => {
    h = await fakeHarness();
    for (const type of ['application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'text/plain']) {
      const res = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: 'name=box&image=x', headers: { 'content-type': type } });
      expect(res.statusCode, type).toBe(400);
      expect(res.json().error).toBe(
        `content-type: the body was sent as ${type.split(';')[0]} and is not JSON; send a JSON body with Content-Type: application/json`,
      );
    }
    const curl = await h.app.inject({
      method: 'POST',
      url: '/sandboxes',
      payload: '{"name":"box"}',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(curl.statusCode).toBe(201);
    const broken = await h.app.inject({ method: 'POST', url: '/sandboxes', payload: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().error).toMatch(/^malformed JSON body: /);
  });
});
