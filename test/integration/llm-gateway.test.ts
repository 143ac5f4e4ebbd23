import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, dockerRuntime, uniqueName, type DockerRuntime } from '../helpers/docker-runtime.js';
import { FakeLlmUpstream } from '../helpers/fake-llm-upstream.js';
import { createLogger } from '../../src/telemetry/logger.js';

/**
 * The LLM gateway from inside real Docker sandboxes: the proxy port listens on the bridge
 * gateway address, a process in a moderate sandbox reaches it with nothing but the env it was
 * given, and the provider (a LOCAL FAKE on the host's loopback) gets the real key.
 */
const REAL_KEY = `sk-real-${Math.random().toString(36).slice(2)}`;
let rt: DockerRuntime;
let upstream: FakeLlmUpstream;
const name = uniqueName('llm');
/** Everything the server said: every API answer, every event, every log line (trace level). */
const said: string[] = [];
const api = async (method: string, path: string, body?: unknown) => {
  const res = await call(rt.url, method, path, body);
  said.push(JSON.stringify(res.body));
  return res;
};

const CLIENT = `
import json, os, sys, urllib.request
body = json.loads(sys.argv[1])
request = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', data=json.dumps(body).encode(),
    headers={'Authorization': 'Bearer ' + os.environ['OPENAI_API_KEY'], 'Content-Type': 'application/json'})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        print(answer.status)
        print(answer.read().decode())
except urllib.error.HTTPError as error:
    print(error.code)
    print(error.read().decode())
`;

const SEARCH = `
import os
key = os.environ['R'][::-1].encode()
hits = []
for root, dirs, files in os.walk('/'):
    if root == '/':
        dirs[:] = [d for d in dirs if d not in ('proc', 'sys', 'dev')]
    for name in files:
        path = os.path.join(root, name)
        try:
            if os.path.isfile(path) and not os.path.islink(path) and key in open(path, 'rb').read():
                hits.append(path)
        except OSError:
            pass
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        if key in open('/proc/%s/environ' % pid, 'rb').read():
            hits.append('/proc/%s/environ' % pid)
    except OSError:
        pass
print(len(hits), 'places', *hits)
`;

async function client(body: unknown, env: Record<string, string> = {}): Promise<{ status: number; text: string }> {
  const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['python3', '-c', CLIENT, JSON.stringify(body)], env });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.exit_code, res.body.data.stderr).toBe(0);
  const [status = '', ...rest] = (res.body.data.stdout as string).split('\n');
  return { status: Number(status), text: rest.join('\n') };
}

beforeAll(async () => {
  upstream = new FakeLlmUpstream();
  const upstreamUrl = await upstream.start();
  rt = await dockerRuntime({ proxy: true, proxyPort: 0 }, undefined, createLogger('trace', { write: (line: string) => void said.push(line) }));
  rt.services.observability.bus.subscribe(({ event }) => void said.push(JSON.stringify(event)));
  expect((await api('PUT', '/llm/keys/openai', { value: REAL_KEY, base_url: upstreamUrl })).status).toBe(200);
  const created = await api('POST', '/sandboxes', { name, image: 'sandboxd/python:bookworm' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
});
afterAll(async () => {
  await rt?.dispose();
  await upstream?.close();
});

describe('LLM gateway from a Docker sandbox', () => {
  it("listens on the Docker bridge's gateway address", async () => {
    const gateway = await rt.backend.capabilities.gateway!.gatewayAddress();
    expect(gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(gateway).not.toBe('127.0.0.1');
    expect(rt.services.egress.url).toMatch(new RegExp(`^http://${gateway.replace(/\./g, '\\.')}:\\d+$`));
  });

  it('a process in the sandbox calls the provider through the gateway; the real key stays outside', async () => {
    const answer = await client({ model: 'gpt-test', messages: [{ role: 'user', content: 'hi' }] });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.text)).toMatchObject({ object: 'chat.completion', model: 'gpt-test' });
    const received = upstream.requests.at(-1)!;
    expect(received.headers.authorization).toBe(`Bearer ${REAL_KEY}`);
    expect(JSON.stringify(received)).not.toContain('sbx-');
    const reported = upstream.reported.at(-1)!;
    const usage = await vi.waitFor(async () => {
      const res = await api('GET', `/llm/usage/${name}`);
      expect(res.status).toBe(200);
      return res.body.data;
    });
    expect(usage.totals).toMatchObject({ requests: 1, input_tokens: reported.input, output_tokens: reported.output });
  });

  it('a streamed answer arrives whole, without the usage chunk the gateway asked for, and is counted', async () => {
    const before = upstream.reported.length;
    const answer = await client({ model: 'gpt-test', stream: true, messages: [] });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"content":"Hel"');
    expect(answer.text).toContain('data: [DONE]');
    expect(answer.text).not.toContain('"choices":[]');
    expect(upstream.reported.length).toBe(before + 1);
    const reported = upstream.totals();
    await vi.waitFor(async () => {
      const res = await api('GET', `/llm/usage/${name}`);
      expect(res.body.data.totals).toMatchObject({ requests: 2, input_tokens: reported.input, output_tokens: reported.output });
    });
  });

  it('the sandbox holds placeholders only: no real key in its env or its processes', async () => {
    const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['sh', '-c', 'env; cat /proc/1/environ | tr "\\0" "\\n"'] });
    const out = res.body.data.stdout as string;
    expect(out).toMatch(/^OPENAI_API_KEY=sbx-[0-9a-f-]{36}-[A-Za-z0-9_-]{43}$/m);
    expect(out).toMatch(/^OPENAI_BASE_URL=http:\/\/\d+\.\d+\.\d+\.\d+:\d+\/llm\/openai\/v1$/m);
    expect(out).toMatch(/^ANTHROPIC_BASE_URL=.*\/llm\/anthropic$/m);
    expect(out).not.toContain(REAL_KEY);
  });

  it('a forged key from inside the sandbox is refused with 401 and never forwarded', async () => {
    const before = upstream.requests.length;
    const answer = await client({ model: 'x' }, { OPENAI_API_KEY: 'sbx-0192d4e0-7b3c-7def-8a12-3456789abcde-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.text).error.message).toContain('not valid');
    expect(upstream.requests.length).toBe(before);
  });

  it('the real key appears nowhere: not in the sandbox, an answer, an event or a log line', async () => {
    // Everywhere in the sandbox a process can read: every file, and every process's environment.
    // The search gets the key reversed, so that it holds no copy of its own to find.
    const search = async (text: string) => {
      const res = await api('POST', `/sandboxes/${name}/exec`, { command: ['python3', '-c', SEARCH], env: { R: [...text].reverse().join('') }, timeout_ms: 90_000 });
      expect(res.body.data.exit_code, res.body.data.stderr).toBe(0);
      return res.body.data.stdout as string;
    };
    // The search finds what is there: a canary written to a file.
    const canary = `canary-${Math.random().toString(36).slice(2)}`;
    await api('PUT', `/sandboxes/${name}/files/tmp/canary`, { content: canary });
    expect(await search(canary)).toBe('1 places /tmp/canary\n');
    expect(await search(REAL_KEY)).toBe('0 places\n');
    // The key routes, usage and audit, besides everything the earlier tests received.
    for (const path of ['/llm/keys', '/llm/usage', `/llm/usage/${name}`, `/sandboxes/${name}`, `/sandboxes/${name}/logs`, '/policy/audit']) await api('GET', path);
    expect(said.length).toBeGreaterThan(20);
    expect(said.filter((text) => text.includes(REAL_KEY))).toEqual([]);
  });
});
