import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { llmHarness, REAL_KEYS, type LlmHarness } from '../../../helpers/llm-harness.js';

/**
 * The LLM gateway on the proxy port (127.0.0.1 here) in front of a LOCAL FAKE provider
 * (test/helpers/fake-llm-upstream.ts): every answer format it meters, the key swap, refusals.
 */
let t: LlmHarness;
let token: string;
const SANDBOX = 'agent-1';

beforeEach(async () => {
  t = await llmHarness();
  const created = await t.h.services.sandboxes.create({ name: SANDBOX });
  token = t.h.services.egress.tokens.mint(created.uuid);
});
afterEach(async () => {
  await t.close();
});

type Auth = 'bearer' | 'x-api-key' | 'x-goog-api-key' | 'query';

async function call(path: string, body: unknown, auth: Auth, key = token): Promise<{ status: number; text: string; headers: Headers }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  let url = `${t.gateway}${path}`;
  if (auth === 'bearer') headers.authorization = `Bearer ${key}`;
  else if (auth === 'query') url += `${url.includes('?') ? '&' : '?'}key=${key}`;
  else headers[auth] = key;
  const response = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: response.status, text: await response.text(), headers: response.headers };
}

/** The sandbox's counted usage, once the gateway has written it. */
async function counted(expected: { requests: number }) {
  return vi.waitFor(async () => {
    const response = await t.h.app.inject({ method: 'GET', url: `/llm/usage/${SANDBOX}` });
    const data = response.json().data;
    expect(data.totals.requests).toBe(expected.requests);
    return data as { totals: { requests: number; input_tokens: number; output_tokens: number; errors: number; unmetered_requests: number }; by_model: { provider: string; model: string }[] };
  });
}

const CASES: { name: string; provider: keyof typeof REAL_KEYS; path: string; body: Record<string, unknown>; auth: Auth; sse: boolean }[] = [
  { name: 'OpenAI Chat JSON', provider: 'openai', path: '/llm/openai/v1/chat/completions', body: { model: 'gpt-4o-mini', messages: [] }, auth: 'bearer', sse: false },
  { name: 'OpenAI Chat SSE (include_usage added)', provider: 'openai', path: '/llm/openai/v1/chat/completions', body: { model: 'gpt-4o-mini', stream: true, messages: [] }, auth: 'bearer', sse: true },
  {
    name: 'OpenAI Chat SSE (include_usage asked)',
    provider: 'openai',
    path: '/llm/openai/v1/chat/completions',
    body: { model: 'gpt-4o', stream: true, stream_options: { include_usage: true }, messages: [] },
    auth: 'bearer',
    sse: true,
  },
  { name: 'OpenAI Responses JSON', provider: 'openai', path: '/llm/openai/v1/responses', body: { model: 'gpt-4.1', input: 'hi' }, auth: 'bearer', sse: false },
  { name: 'OpenAI Responses SSE', provider: 'openai', path: '/llm/openai/v1/responses', body: { model: 'gpt-4.1', input: 'hi', stream: true }, auth: 'bearer', sse: true },
  { name: 'Anthropic JSON', provider: 'anthropic', path: '/llm/anthropic/v1/messages', body: { model: 'claude-sonnet-4', max_tokens: 10 }, auth: 'x-api-key', sse: false },
  { name: 'Anthropic SSE', provider: 'anthropic', path: '/llm/anthropic/v1/messages', body: { model: 'claude-sonnet-4', max_tokens: 10, stream: true }, auth: 'x-api-key', sse: true },
  { name: 'Gemini JSON', provider: 'google', path: '/llm/google/v1beta/models/gemini-2.5-flash:generateContent', body: { contents: [] }, auth: 'x-goog-api-key', sse: false },
  { name: 'Gemini SSE', provider: 'google', path: '/llm/google/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse', body: { contents: [] }, auth: 'x-goog-api-key', sse: true },
  { name: 'Gemini JSON array stream, key in the query', provider: 'google', path: '/llm/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent', body: { contents: [] }, auth: 'query', sse: false },
];

describe('LLM gateway: every answer format', () => {
  for (const c of CASES) {
    it(`${c.name}: swaps the key, streams the answer, counts the provider's usage`, async () => {
      const answer = await call(c.path, c.body, c.auth);
      expect(answer.status).toBe(200);
      expect(answer.headers.get('content-type')).toBe(c.sse ? 'text/event-stream' : 'application/json');
      const received = t.upstream.requests.at(-1)!;
      // The real key in the provider's header, the placeholder nowhere.
      const header = { openai: 'authorization', anthropic: 'x-api-key', google: 'x-goog-api-key' }[c.provider];
      expect(received.headers[header]).toBe(c.provider === 'openai' ? `Bearer ${REAL_KEYS.openai}` : REAL_KEYS[c.provider]);
      expect(JSON.stringify(received)).not.toContain('sbx-');
      expect(answer.text).not.toContain(REAL_KEYS[c.provider]);
      const reported = t.upstream.reported.at(-1)!;
      const usage = await counted({ requests: 1 });
      expect(usage.totals).toMatchObject({ input_tokens: reported.input, output_tokens: reported.output, errors: 0, unmetered_requests: 0 });
      expect(usage.by_model).toMatchObject([{ provider: c.provider, model: reported.model }]);
    });
  }

  it('counts equal to the reported usage over many requests of every format (100 %)', async () => {
    for (let round = 0; round < 3; round++) for (const c of CASES) expect((await call(c.path, c.body, c.auth)).status).toBe(200);
    const usage = await counted({ requests: 3 * CASES.length });
    const reported = t.upstream.totals();
    expect(usage.totals).toMatchObject({ input_tokens: reported.input, output_tokens: reported.output, unmetered_requests: 0 });
    const metrics = await t.h.services.observability.metrics.registry.getSingleMetricAsString('sandboxd_llm_tokens_total');
    const sum = (direction: string) =>
      [...metrics.matchAll(new RegExp(`direction="${direction}"[^}]*} (\\d+)`, 'g'))].reduce((total, m) => total + Number(m[1]), 0);
    expect(sum('input')).toBe(reported.input);
    expect(sum('output')).toBe(reported.output);
  });

  it('adds include_usage to a Chat stream and leaves the usage-only chunk out of what the client gets', async () => {
    const answer = await call('/llm/openai/v1/chat/completions', { model: 'm', stream: true, messages: [] }, 'bearer');
    expect(JSON.parse(t.upstream.requests.at(-1)!.body)).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const events = answer.text.split('\n\n').filter(Boolean);
    expect(events).toEqual(['data: {"id":"c1","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}', expect.stringContaining('"lo"'), 'data: [DONE]']);
  });

  it('passes the usage chunk through when the client asked for it', async () => {
    const answer = await call('/llm/openai/v1/chat/completions', { model: 'm', stream: true, stream_options: { include_usage: true }, messages: [] }, 'bearer');
    expect(answer.text).toContain('"choices":[],"usage"');
  });

  it('with stream_usage off, forwards the body unchanged and counts the request as unmetered', async () => {
    await t.close();
    t = await llmHarness({ streamUsage: false });
    const created = await t.h.services.sandboxes.create({ name: SANDBOX });
    token = t.h.services.egress.tokens.mint(created.uuid);
    const body = { model: 'm', stream: true, messages: [] };
    expect((await call('/llm/openai/v1/chat/completions', body, 'bearer')).status).toBe(200);
    expect(JSON.parse(t.upstream.requests.at(-1)!.body)).toEqual(body);
    expect((await counted({ requests: 1 })).totals).toMatchObject({ input_tokens: 0, output_tokens: 0, unmetered_requests: 1 });
  });

  it('passes a provider error through and counts it as an error', async () => {
    const answer = await call('/llm/openai/status/500', {}, 'bearer');
    expect(answer.status).toBe(500);
    expect(JSON.parse(answer.text)).toEqual({ error: { message: 'scripted failure' } });
    expect((await counted({ requests: 1 })).totals).toMatchObject({ errors: 1, unmetered_requests: 0 });
  });

  it('masks the real key where the provider echoes it (a split echo included), keeping the length', async () => {
    const answer = await call('/llm/openai/echo', {}, 'bearer');
    expect(answer.status).toBe(401);
    expect(answer.text).not.toContain(REAL_KEYS.openai);
    expect(JSON.parse(answer.text)).toEqual({ error: { message: `bad key: Bearer ${'*'.repeat(REAL_KEYS.openai.length)}` } });
  });

  it('the real keys appear in no response, event or log line', async () => {
    for (const c of CASES) await call(c.path, c.body, c.auth);
    await call('/llm/openai/fail', {}, 'bearer');
    const keysView = (await t.h.app.inject({ method: 'GET', url: '/llm/keys' })).body;
    const usage = (await t.h.app.inject({ method: 'GET', url: '/llm/usage' })).body;
    for (const key of Object.values(REAL_KEYS)) {
      expect(keysView).not.toContain(key);
      expect(usage).not.toContain(key);
      expect(JSON.stringify(t.events)).not.toContain(key);
      expect(t.logLines.join('')).not.toContain(key);
    }
    expect(t.logLines.length).toBeGreaterThan(0);
  });
});

describe('LLM gateway: refusals', () => {
  it('a request without a sandbox token is 401 in the provider format, and nothing is forwarded', async () => {
    const response = await fetch(`${t.gateway}/llm/anthropic/v1/messages`, { method: 'POST', body: '{}', headers: { 'x-api-key': 'sk-user-typed-key' } });
    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ type: 'error', error: { type: 'authentication_error', message: expect.stringContaining('no sandbox token') } });
    expect(t.upstream.requests).toHaveLength(0);
  });

  it('a forged token (another MAC) is 401', async () => {
    const [, uuid] = /^sbx-(.{36})-/.exec(token)!;
    const forged = `sbx-${uuid}-${'A'.repeat(43)}`;
    const answer = await call('/llm/openai/v1/chat/completions', { model: 'm' }, 'bearer', forged);
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.text).error.message).toContain('not valid');
    expect(t.upstream.requests).toHaveLength(0);
  });

  it('a token of another server (another secret key) is 401', async () => {
    const other = await llmHarness();
    try {
      const created = await other.h.services.sandboxes.create({ name: 'elsewhere' });
      const foreign = other.h.services.egress.tokens.mint(created.uuid);
      expect((await call('/llm/openai/v1/chat/completions', {}, 'bearer', foreign)).status).toBe(401);
    } finally {
      await other.close();
    }
  });

  it("a deleted sandbox's token is 401", async () => {
    await t.h.services.sandboxes.remove(SANDBOX);
    const answer = await call('/llm/openai/v1/chat/completions', {}, 'bearer');
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.text).error.message).toContain('no longer exists');
  });

  it('an unknown provider is 404 naming the providers served', async () => {
    const answer = await call('/llm/nosuch/v1/chat/completions', {}, 'bearer');
    expect(answer.status).toBe(404);
    expect(JSON.parse(answer.text).error.message).toContain("unknown LLM provider 'nosuch': the gateway serves openai, anthropic, google");
  });

  it('a path outside /llm/ is 404 and a CONNECT without a sandbox token is 407 (the egress proxy asks for one)', async () => {
    expect((await fetch(`${t.gateway}/other`)).status).toBe(404);
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const url = new URL(t.gateway);
      request({ host: url.hostname, port: url.port, method: 'CONNECT', path: 'example.com:443' })
        .on('connect', (response, socket) => {
          socket.destroy();
          resolve(response.statusCode ?? 0);
        })
        .on('error', reject)
        .end();
    });
    expect(status).toBe(407);
  });

  it('an upstream that cannot be reached is 502 with a clear message in the provider format', async () => {
    await t.h.app.inject({ method: 'PUT', url: '/llm/keys/google', payload: { value: REAL_KEYS.google, base_url: 'http://127.0.0.1:9' } });
    const answer = await call('/llm/google/v1beta/models/g:generateContent', {}, 'x-goog-api-key');
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.text)).toEqual({ error: { code: 502, status: 'UNAVAILABLE', message: 'sandboxd LLM gateway: the gateway could not reach google at 127.0.0.1:9: ECONNREFUSED' } });
    expect((await counted({ requests: 1 })).totals).toMatchObject({ errors: 1 });
  });

  it('an upstream that drops the connection is 502', async () => {
    const answer = await call('/llm/openai/fail', {}, 'bearer');
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.text).error.message).toMatch(/could not reach openai at 127\.0\.0\.1:\d+: ECONNRESET/);
  });

  it('a request body over 32 MiB is 413 and nothing is forwarded', async () => {
    const huge = Buffer.alloc(32 * 1024 * 1024 + 1, 0x20);
    const response = await fetch(`${t.gateway}/llm/openai/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: huge });
    expect(response.status).toBe(413);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain('larger than 33554432 bytes');
    expect(t.upstream.requests).toHaveLength(0);
  });

  it('a GET passes through with its query, and a provider 404 comes back as it was', async () => {
    const response = await fetch(`${t.gateway}/llm/openai/v1/models?limit=2`, { headers: { authorization: `Bearer ${token}` } });
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({ error: { message: 'the fake provider has no /v1/models' } });
    expect(t.upstream.requests.at(-1)).toMatchObject({ method: 'GET', url: '/v1/models?limit=2', body: '' });
    expect(t.upstream.requests.at(-1)!.headers['content-length']).toBeUndefined();
  });

  it('a provider without a key is 503 saying how to set one', async () => {
    await t.h.app.inject({ method: 'DELETE', url: '/llm/keys/anthropic' });
    const answer = await call('/llm/anthropic/v1/messages', {}, 'x-api-key');
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.text).error.message).toContain('an administrator of sandboxd sets one (its LLM key /llm/keys/anthropic)');
  });

  it('past its llm_budget_tokens a sandbox gets 429 in the provider format and one llm.budget_exceeded event', async () => {
    const created = await t.h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'budgeted', llm_budget_tokens: 1 } });
    expect(created.statusCode).toBe(201);
    const budgeted = t.h.services.egress.tokens.mint(created.json().data.uuid);
    expect((await call('/llm/anthropic/v1/messages', { model: 'c' }, 'x-api-key', budgeted)).status).toBe(200);
    await vi.waitFor(async () => expect((await t.h.app.inject({ method: 'GET', url: '/llm/usage/budgeted' })).statusCode).toBe(200));
    for (let i = 0; i < 2; i++) {
      const refused = await call('/llm/anthropic/v1/messages', { model: 'c' }, 'x-api-key', budgeted);
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.text)).toMatchObject({ type: 'error', error: { type: 'rate_limit_error' } });
    }
    expect(t.upstream.requests).toHaveLength(1);
    expect(t.events.filter((e) => e.type === 'llm.budget_exceeded')).toMatchObject([{ sandbox: 'budgeted', metadata: { budget_tokens: 1 } }]);
  });

  it('llm_budget_tokens that is not a positive integer is 400 naming the field', async () => {
    for (const bad of [0, -5, 1.5, 'many']) {
      const response = await t.h.app.inject({ method: 'POST', url: '/sandboxes', payload: { name: 'bad-budget', llm_budget_tokens: bad } });
      expect(response.statusCode).toBe(400);
      expect(response.json().error).toContain('llm_budget_tokens');
    }
  });
});
