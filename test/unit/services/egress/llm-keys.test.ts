import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ExecRequest } from '../../../../src/backends/backend.js';
import { llmHarness, REAL_KEYS, type LlmHarness } from '../../../helpers/llm-harness.js';
import { fakeHarness } from '../../../helpers/fake-app.js';
import { scriptObjectRunner } from '../../../helpers/object-runner-double.js';

/** The keys API, the usage API and the env sandboxes get, over the fake backend and a local fake provider. */
let t: LlmHarness;

beforeEach(async () => {
  t = await llmHarness();
});
afterEach(async () => {
  await t.close();
});

const inject = (method: 'GET' | 'PUT' | 'DELETE', url: string, payload?: unknown) => t.h.app.inject({ method, url, ...(payload !== undefined ? { payload: payload as object } : {}) });

describe('GET/PUT/DELETE /llm/keys', () => {
  it('lists every provider with where its key comes from, never the key', async () => {
    const response = await inject('GET', '/llm/keys');
    expect(response.statusCode).toBe(200);
    const keys = response.json().data as { provider: string }[];
    expect(keys.map((k) => k.provider)).toEqual(['openai', 'anthropic', 'google']);
    expect(keys[0]).toEqual({
      provider: 'openai',
      domain: expect.stringMatching(/^127\.0\.0\.1:\d+$/),
      configured: true,
      source: 'stored',
      last4: REAL_KEYS.openai.slice(-4),
      base_url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
      updated_at: expect.any(String),
    });
    for (const key of Object.values(REAL_KEYS)) expect(response.body).not.toContain(key);
  });

  it('PUT answers the view without the value, and the key is stored encrypted', async () => {
    const response = await inject('PUT', '/llm/keys/openai', { value: 'sk-new-secret-value-9999' });
    expect(response.statusCode).toBe(200);
    expect(response.body).not.toContain('sk-new-secret-value');
    expect(response.json().data).toMatchObject({ provider: 'openai', source: 'stored', last4: '9999', base_url: 'https://api.openai.com', domain: 'api.openai.com' });
    const row = await t.h.services.egress.keys.resolve('openai');
    expect(row?.key).toBe('sk-new-secret-value-9999');
    const stored = (t.h.store.db as unknown as { selectFrom: (t: string) => { selectAll: () => { execute: () => Promise<{ secret: string }[]> } } }).selectFrom('llm_keys');
    const rows = await stored.selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain('sk-new-secret-value');
  });

  it('env (and its alias vault_key_name) names a server variable read at each request', async () => {
    const variable = `SANDBOXD_TEST_LLM_KEY_${process.pid}`;
    process.env[variable] = 'sk-from-env-1234';
    try {
      for (const field of ['env', 'vault_key_name']) {
        const response = await inject('PUT', '/llm/keys/anthropic', { [field]: variable });
        expect(response.statusCode).toBe(200);
        expect(response.json().data).toMatchObject({ source: 'env', configured: true, last4: null });
      }
      expect((await t.h.services.egress.keys.resolve('claude'))?.key).toBe('sk-from-env-1234');
      process.env[variable] = 'sk-rotated-5678';
      expect((await t.h.services.egress.keys.resolve('anthropic'))?.key).toBe('sk-rotated-5678');
      delete process.env[variable];
      expect((await inject('GET', '/llm/keys')).json().data[1]).toMatchObject({ provider: 'anthropic', configured: false, source: 'env' });
    } finally {
      delete process.env[variable];
    }
  });

  it('a provider sandboxd does not know needs a base_url, then is an OpenAI-compatible provider', async () => {
    const refused = await inject('PUT', '/llm/keys/groq', { value: 'gsk-1' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatch(/^base_url: 'groq' is not a provider sandboxd knows/);
    const added = await inject('PUT', '/llm/keys/groq', { value: 'gsk-1', base_url: 'https://api.groq.com/openai/v1/' });
    expect(added.json().data).toMatchObject({ provider: 'groq', base_url: 'https://api.groq.com/openai/v1', domain: 'api.groq.com' });
    expect((await inject('GET', '/llm/keys')).json().data.map((k: { provider: string }) => k.provider)).toEqual(['openai', 'anthropic', 'google', 'groq']);
  });

  it('every bad PUT is 400 naming the field', async () => {
    const cases: [string, unknown, RegExp][] = [
      ['/llm/keys/openai', {}, /^value: give the key/],
      ['/llm/keys/openai', { value: 'a', env: 'B' }, /^value, env: give only one/],
      ['/llm/keys/openai', { value: '' }, /value/],
      ['/llm/keys/openai', { value: 'has space' }, /^value: must be a key without spaces/],
      ['/llm/keys/openai', { env: 'NOT_SET_ANYWHERE_123' }, /^env: the server has no environment variable NOT_SET_ANYWHERE_123/],
      ['/llm/keys/openai', { env: '1BAD' }, /^env: must name an environment variable/],
      ['/llm/keys/openai', { value: 'k', base_url: 'ftp://x' }, /^base_url: must be an http or https URL/],
      ['/llm/keys/openai', { value: 'k', base_url: 'not a url' }, /^base_url: 'not a url' is not a URL/],
      ['/llm/keys/openai', { value: 'k', base_url: 'https://u:p@h/' }, /^base_url: must not carry credentials/],
      ['/llm/keys/openai', { value: 'k', base_url: 'https://h/?a=1' }, /^base_url: must not have a query/],
      ['/llm/keys/openai', { value: 'k', other: 1 }, /other/],
      ['/llm/keys/Bad_Name', { value: 'k' }, /provider/],
    ];
    for (const [url, payload, message] of cases) {
      const response = await inject('PUT', url, payload);
      expect(response.statusCode, JSON.stringify(payload)).toBe(400);
      expect(response.json().error).toMatch(message);
    }
  });

  it('DELETE removes the key (200 {removed}), then 404', async () => {
    expect((await inject('DELETE', '/llm/keys/google')).json()).toEqual({ success: true, data: { removed: 'google' } });
    expect((await inject('GET', '/llm/keys')).json().data[2]).toMatchObject({ provider: 'google', configured: false, source: null, last4: null });
    const again = await inject('DELETE', '/llm/keys/google');
    expect(again.statusCode).toBe(404);
    expect(again.json().error).toBe("LLM provider 'google' has no key");
  });
});

describe('GET /llm/usage', () => {
  async function use(name: string, provider: 'openai' | 'anthropic'): Promise<void> {
    const sandbox = await t.h.services.sandboxes.create({ name });
    const token = t.h.services.egress.tokens.mint(sandbox.uuid);
    const path = provider === 'openai' ? '/llm/openai/v1/chat/completions' : '/llm/anthropic/v1/messages';
    const headers: Record<string, string> = provider === 'openai' ? { authorization: `Bearer ${token}` } : { 'x-api-key': token };
    const response = await fetch(`${t.gateway}${path}`, { method: 'POST', headers, body: JSON.stringify({ model: `${provider}-m` }) });
    expect(response.status).toBe(200);
    await response.text();
  }

  it('totals, per sandbox and per model; by provider; per day for one sandbox (also after it is deleted)', async () => {
    await use('a1', 'openai');
    await use('a2', 'anthropic');
    const [u1, u2] = t.upstream.reported;
    const report = await vi.waitFor(async () => {
      const data = (await inject('GET', '/llm/usage')).json().data;
      expect(data.totals.requests).toBe(2);
      return data;
    });
    const today = new Date().toISOString().slice(0, 10);
    expect(report.until).toBe(today);
    expect(report.totals).toMatchObject({ input_tokens: u1!.input + u2!.input, output_tokens: u1!.output + u2!.output });
    expect(report.by_sandbox.map((s: { sandbox: string }) => s.sandbox).sort()).toEqual(['a1', 'a2']);
    expect(report.by_model).toContainEqual(expect.objectContaining({ provider: 'anthropic', model: 'anthropic-m', input_tokens: u2!.input }));
    const anthropic = (await inject('GET', '/llm/usage?provider=anthropic')).json().data;
    expect(anthropic.by_sandbox).toMatchObject([{ sandbox: 'a2', requests: 1 }]);
    expect((await inject('GET', `/llm/usage?since=${today}&until=${today}`)).json().data.totals.requests).toBe(2);
    expect((await inject('GET', '/llm/usage?since=2000-01-01&until=2000-01-31')).json().data.totals).toMatchObject({ requests: 0, input_tokens: 0 });
    await t.h.services.sandboxes.remove('a1');
    const one = (await inject('GET', '/llm/usage/a1')).json().data;
    expect(one).toMatchObject({ sandbox: 'a1', totals: { requests: 1, input_tokens: u1!.input }, by_day: [{ day: today, requests: 1 }] });
  });

  it('a sandbox never seen is 404; bad dates and providers are 400 naming the field', async () => {
    const unseen = await inject('GET', '/llm/usage/never-here');
    expect(unseen.statusCode).toBe(404);
    expect(unseen.json().error).toBe("no LLM usage of a sandbox named 'never-here'");
    for (const [query, field] of [['since=yesterday', 'since'], ['until=2026-13-45', 'until'], ['since=2026-02-01&until=2026-01-01', 'since'], ['provider=NO!', 'provider'], ['other=1', 'other']]) {
      const response = await inject('GET', `/llm/usage?${query}`);
      expect(response.statusCode, query).toBe(400);
      expect(response.json().error).toContain(field);
    }
  });
});

describe('the env of sandbox commands', () => {
  let seen: ExecRequest[];
  beforeEach(() => {
    seen = [];
    t.h.backend.onExec = (request) => {
      seen.push(request);
      return { chunks: [] };
    };
  });

  it('a networked sandbox gets base URLs on the gateway and its token as placeholder keys, under its own env', async () => {
    const sandbox = await t.h.services.sandboxes.create({ name: 'net', env: { ANTHROPIC_BASE_URL: 'http://mine' } });
    await t.h.services.exec.exec('net', { command: ['true'], env: { GEMINI_API_KEY: 'request-wins' } });
    const env = seen.at(-1)!.env!;
    const token = t.h.services.egress.tokens.mint(sandbox.uuid);
    expect(env).toMatchObject({
      OPENAI_BASE_URL: `${t.gateway}/llm/openai/v1`,
      OPENAI_API_KEY: token,
      ANTHROPIC_BASE_URL: 'http://mine',
      ANTHROPIC_API_KEY: token,
      GOOGLE_GEMINI_BASE_URL: `${t.gateway}/llm/google`,
      GOOGLE_API_KEY: token,
      GEMINI_API_KEY: 'request-wins',
    });
    expect(t.h.services.egress.tokens.verify(token)).toBe(sandbox.uuid);
    for (const key of Object.values(REAL_KEYS)) expect(JSON.stringify(env)).not.toContain(key);
  });

  it('detached commands get the same env; a provider added with a base_url adds its variables', async () => {
    t.h.backend.declare('detached');
    await inject('PUT', '/llm/keys/my-vllm', { value: 'k', base_url: 'http://127.0.0.1:1/v1' });
    await t.h.services.sandboxes.create({ name: 'bg' });
    await t.h.services.detached.start('bg', { command: ['sleep', '1'] });
    expect(t.h.backend.calls.filter((c) => c.op === 'startDetached')).toHaveLength(1);
    expect(seen.at(-1)!.command).toEqual(['sleep', '1']);
    expect(seen.at(-1)!.env).toMatchObject({ MY_VLLM_BASE_URL: `${t.gateway}/llm/my-vllm`, MY_VLLM_API_KEY: expect.stringMatching(/^sbx-/) });
  });

  it("a durable object's worker gets it too (with its class variable)", async () => {
    t.h.backend.declare('workers');
    scriptObjectRunner(t.h.backend, { counter: { ping: () => 'pong' } });
    const defined = await t.h.app.inject({ method: 'POST', url: '/objects/classes', payload: { name: 'counter', runtime: 'node', source: 'export const x = 1;' } });
    expect(defined.statusCode).toBe(201);
    const called = await t.h.app.inject({ method: 'POST', url: '/objects/counter/alice/call/ping' });
    expect(called.json()).toEqual({ success: true, data: 'pong' });
    const object = (await t.h.app.inject({ url: '/objects/counter/alice' })).json().data;
    const uuid = (await t.h.services.sandboxes.get(object.sandbox)).uuid;
    expect(t.h.backend.workerStarts[0]!.request.env).toEqual({
      ...(await t.h.services.egress.sandboxEnv({ uuid, profile: 'moderate' })),
      SANDBOXD_OBJECT_CLASS: 'counter',
    });
    expect(t.h.backend.workerStarts[0]!.request.env).toMatchObject({ OPENAI_API_KEY: t.h.services.egress.tokens.mint(uuid) });
  });

  it('a restrictive sandbox (no network) gets none of it', async () => {
    await t.h.services.sandboxes.create({ name: 'closed', profile: 'restrictive' });
    await t.h.services.exec.exec('closed', { command: ['true'] });
    expect(seen.at(-1)!.env).toBeUndefined();
  });

  it('without the proxy port nothing is added', async () => {
    const plain = await fakeHarness();
    try {
      let env: Record<string, string> | undefined = { unset: 'yes' };
      plain.backend.onExec = (request) => {
        env = request.env;
        return { chunks: [] };
      };
      await plain.services.sandboxes.create({ name: 'plain' });
      await plain.services.exec.exec('plain', { command: ['true'] });
      expect(env).toBeUndefined();
    } finally {
      await plain.close();
    }
  });
});
