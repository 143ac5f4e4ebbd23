import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { KeyScrubber } from '../../../../src/services/egress/key-scrubber.js';
import { SandboxTokens } from '../../../../src/services/egress/sandbox-token.js';
import { UsageMeter, usageOf } from '../../../../src/services/egress/llm-usage-meter.js';
import { prepareBody } from '../../../../src/services/egress/llm-gateway.js';
import { providersFrom } from '../../../../src/services/egress/llm-providers.js';
import { secretBoxFor } from '../../../../src/services/support/secret-box.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

const dirs: string[] = [];
const tokensIn = () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-token-'));
  dirs.push(dir);
  return new SandboxTokens(secretBoxFor(dir, undefined, silentLogger()));
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('SandboxTokens', () => {
  const uuid = '0192d4e0-7b3c-7def-8a12-3456789abcde';

  it('a token names its sandbox and verifies with the key that made it only', () => {
    const tokens = tokensIn();
    const token = tokens.mint(uuid);
    expect(token).toMatch(/^sbx-0192d4e0-7b3c-7def-8a12-3456789abcde-[A-Za-z0-9_-]{43}$/);
    expect(tokens.mint(uuid)).toBe(token);
    expect(tokens.verify(token)).toBe(uuid);
    expect(tokensIn().verify(token)).toBeUndefined();
  });

  it('refuses altered, truncated and malformed tokens', () => {
    const tokens = tokensIn();
    const token = tokens.mint(uuid);
    const other = tokens.mint('0192d4e0-7b3c-7def-8a12-3456789abcdf');
    const swapped = `sbx-0192d4e0-7b3c-7def-8a12-3456789abcdf-${token.slice(-43)}`;
    const flipped = token.slice(0, -1) + (token.endsWith('A') ? 'B' : 'A');
    // The last of 43 base64url characters carries 2 bits and 4 unused ones: another spelling of
    // the same bytes is still not the token.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const respelled = token.slice(0, -1) + alphabet[alphabet.indexOf(token.at(-1)!) ^ 1];
    expect(Buffer.from(respelled.slice(-43), 'base64url')).toEqual(Buffer.from(token.slice(-43), 'base64url'));
    for (const bad of [swapped, flipped, respelled, token.slice(0, -1), `${token}A`, other.replace('sbx-', 'sbz-'), '', 'sbx-', `Bearer ${token}`, token.toUpperCase()]) {
      expect(tokens.verify(bad), bad).toBeUndefined();
    }
  });
});

describe('usageOf', () => {
  it('reads each provider format', () => {
    expect(usageOf({ model: 'gpt', usage: { prompt_tokens: 3, completion_tokens: 4 } })).toEqual({ model: 'gpt', input: 3, output: 4 });
    expect(usageOf({ type: 'response.completed', response: { model: 'r', usage: { input_tokens: 5, output_tokens: 6 } } })).toEqual({ model: 'r', input: 5, output: 6 });
    expect(usageOf({ type: 'message_start', message: { model: 'c', usage: { input_tokens: 7, output_tokens: 1 } } })).toEqual({ model: 'c', input: 7, output: 1 });
    expect(usageOf({ type: 'message_delta', usage: { output_tokens: 9 } })).toEqual({ output: 9 });
    expect(usageOf({ modelVersion: 'g', usageMetadata: { promptTokenCount: 2, candidatesTokenCount: 3, thoughtsTokenCount: 10 } })).toEqual({ model: 'g', input: 2, output: 13 });
    for (const none of [null, 5, 'x', [], { usage: null }, { usage: { prompt_tokens: -1, completion_tokens: 'many' } }]) expect(usageOf(none)).toEqual({});
  });
});

describe('UsageMeter', () => {
  const events = ['data: {"choices":[{"delta":{"content":"é"}}]}\r\n\r\n', 'data: {"choices":[],"usage":{"prompt_tokens":11,"completion_tokens":22},"model":"m"}\r\n\r\n', 'data: [DONE]\r\n\r\n'];
  const bytes = Buffer.from(events.join(''), 'utf8');

  /** Feeds `bytes` in pieces of `size` (splitting events and a multi-byte character). */
  function feed(meter: UsageMeter, size: number): Buffer {
    const out: Buffer[] = [];
    for (let i = 0; i < bytes.length; i += size) out.push(meter.push(bytes.subarray(i, i + size)));
    out.push(meter.flush());
    return Buffer.concat(out);
  }

  it('counts an SSE stream cut anywhere and hands every byte on unchanged', () => {
    for (const size of [1, 2, 3, 7, 64, bytes.length]) {
      const meter = new UsageMeter({ contentType: 'text/event-stream; charset=utf-8', stripUsageChunk: false });
      expect(feed(meter, size).equals(bytes)).toBe(true);
      expect(meter.result()).toEqual({ input: 11, output: 22, model: 'm' });
    }
  });

  it('leaves out only the usage-only chunk when told to, wherever the stream is cut', () => {
    for (const size of [1, 5, bytes.length]) {
      const meter = new UsageMeter({ contentType: 'text/event-stream', stripUsageChunk: true });
      expect(feed(meter, size).toString('utf8')).toBe(events[0]! + events[2]!);
      expect(meter.result()).toEqual({ input: 11, output: 22, model: 'm' });
    }
  });

  it('reads a last event without its blank line', () => {
    const meter = new UsageMeter({ contentType: 'text/event-stream', stripUsageChunk: false });
    meter.push(Buffer.from('data: {"usage":{"input_tokens":1,"output_tokens":2}}'));
    meter.flush();
    expect(meter.result()).toEqual({ input: 1, output: 2 });
  });

  it('keeps an earlier input count over a later 0 (Anthropic message_delta)', () => {
    const meter = new UsageMeter({ contentType: 'text/event-stream', stripUsageChunk: false });
    meter.push(Buffer.from('data: {"type":"message_start","message":{"usage":{"input_tokens":40,"output_tokens":1}}}\n\ndata: {"type":"message_delta","usage":{"input_tokens":0,"output_tokens":25}}\n\n'));
    expect(meter.result()).toEqual({ input: 40, output: 25 });
  });

  it('JSON: reads a whole answer and a JSON array of chunks; malformed or other types are unmetered', () => {
    const json = new UsageMeter({ contentType: 'application/json', stripUsageChunk: false });
    json.push(Buffer.from('{"usage":{"prompt_tokens":1,'));
    json.push(Buffer.from('"completion_tokens":2}}'));
    expect(json.result()).toEqual({ input: 1, output: 2 });
    const array = new UsageMeter({ contentType: 'application/json', stripUsageChunk: false });
    array.push(Buffer.from('[{"usageMetadata":{"promptTokenCount":3}},{"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4}}]'));
    expect(array.result()).toEqual({ input: 3, output: 4 });
    const broken = new UsageMeter({ contentType: 'application/json', stripUsageChunk: false });
    broken.push(Buffer.from('{"usage":'));
    expect(broken.result()).toBeUndefined();
    expect(broken.incomplete).toBe(true);
    const text = new UsageMeter({ contentType: 'text/plain', stripUsageChunk: false });
    expect(text.push(Buffer.from('{"usage":{"prompt_tokens":1}}')).toString()).toBe('{"usage":{"prompt_tokens":1}}');
    expect(text.result()).toBeUndefined();
  });
});

describe('prepareBody', () => {
  const providers = providersFrom({ groq: { base_url: 'https://api.groq.com/openai/v1' } });
  const body = (value: unknown) => Buffer.from(JSON.stringify(value));

  it('adds include_usage to OpenAI-format Chat streams only, keeping other stream_options', () => {
    const added = prepareBody(providers.get('groq')!, 'POST', 'chat/completions', body({ model: 'l', stream: true, stream_options: { other: 1 } }), true);
    expect(JSON.parse(added.body.toString())).toEqual({ model: 'l', stream: true, stream_options: { other: 1, include_usage: true } });
    expect(added).toMatchObject({ model: 'l', stripUsageChunk: true });
    const unchanged = [
      prepareBody(providers.get('openai')!, 'POST', 'v1/chat/completions', body({ stream: false }), true),
      prepareBody(providers.get('openai')!, 'POST', 'v1/chat/completions', body({ stream: true, stream_options: { include_usage: false } }), true),
      prepareBody(providers.get('openai')!, 'POST', 'v1/chat/completions', body({ stream: true }), false),
      prepareBody(providers.get('anthropic')!, 'POST', 'v1/messages', body({ stream: true }), true),
      prepareBody(providers.get('openai')!, 'POST', 'v1/chat/completions', Buffer.from('not json'), true),
      // Nested 100,000 levels deep: forwarded as it is, unread (no walk of it).
      prepareBody(providers.get('openai')!, 'POST', 'v1/chat/completions', Buffer.from(`${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`), true),
    ];
    for (const result of unchanged) expect(result.stripUsageChunk).toBe(false);
    expect(prepareBody(providers.get('google')!, 'POST', 'v1beta/models/gemini-x:generateContent', body({}), true).model).toBe('gemini-x');
  });
});

describe('providersFrom', () => {
  it('overrides built-ins, adds OpenAI-compatible providers, and names the bad setting', () => {
    const providers = providersFrom({ openai: { base_url: 'http://127.0.0.1:9/' }, gemini: { base_url: 'http://g' }, 'my-llm': { base_url: 'http://h/v1', auth_header: 'Api-Key', auth_scheme: '' } });
    expect(providers.get('openai')).toMatchObject({ baseUrl: 'http://127.0.0.1:9', auth: { header: 'authorization', scheme: 'Bearer' } });
    expect(providers.get('google')?.baseUrl).toBe('http://g');
    expect(providers.get('my-llm')).toMatchObject({ auth: { header: 'api-key', scheme: '' }, format: 'openai', env: { baseUrl: ['MY_LLM_BASE_URL'], keys: ['MY_LLM_API_KEY'] } });
    expect(() => providersFrom({ groq: {} })).toThrow('[llm.providers.groq].base_url: required');
    expect(() => providersFrom({ 'Bad!': { base_url: 'http://x' } })).toThrow('[llm.providers.Bad!]: the provider name must match');
    expect(() => providersFrom({ x: { base_url: 'http://x', auth_header: 'no spaces allowed' } })).toThrow('[llm.providers.x].auth_header');
  });
});

describe('KeyScrubber', () => {
  it('masks the secret wherever the stream is cut, keeping every other byte and the length', () => {
    const secret = 'sk-secret-ABC';
    const text = `a sk-secret-AB sk-secret-ABC, s${secret}${secret}s sk-`;
    const expected = text.replaceAll(secret, '*'.repeat(secret.length));
    for (const size of [1, 2, 5, 13, text.length]) {
      const scrubber = new KeyScrubber(secret);
      const bytes = Buffer.from(text);
      const out: Buffer[] = [];
      for (let i = 0; i < bytes.length; i += size) out.push(scrubber.push(bytes.subarray(i, i + size)));
      out.push(scrubber.flush());
      expect(Buffer.concat(out).toString(), `pieces of ${size}`).toBe(expected);
    }
  });

  it('holds nothing back when the end cannot begin the secret', () => {
    const scrubber = new KeyScrubber('sk-secret');
    expect(scrubber.push(Buffer.from('data: {"a":1}\n\n')).toString()).toBe('data: {"a":1}\n\n');
    expect(scrubber.push(Buffer.from('x s')).toString()).toBe('x ');
    expect(scrubber.push(Buffer.from('o')).toString()).toBe('so');
  });
});
