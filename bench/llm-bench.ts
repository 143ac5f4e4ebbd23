import { createServer, request as httpRequest, Agent, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { send } from './http-client.js';
import { report, summarize, timePaired } from './stats.js';

interface Api {
  url: string;
}

/** Milliseconds between the events of the fake's streamed answer (the first comes at once). */
const EVENT_GAP_MS = 20;

/**
 * A local fake OpenAI-compatible provider: Chat JSON answers with usage, and streams of five
 * events EVENT_GAP_MS apart whose first event is written as soon as the request is read.
 */
async function startFakeProvider(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { stream?: boolean };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ object: 'chat.completion', model: 'bench', choices: [{ message: { content: 'ok' } }], usage: { prompt_tokens: 10, completion_tokens: 2 } }));
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let sent = 0;
      const next = () => {
        if (sent++ === 5) {
          res.write('data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5}}\n\ndata: [DONE]\n\n');
          return res.end();
        }
        res.write(`data: {"choices":[{"delta":{"content":"t${sent}"}}]}\n\n`);
        setTimeout(next, EVENT_GAP_MS);
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const agent = new Agent({ keepAlive: true });

/** Milliseconds from sending a streamed request to its first body byte. */
function firstByte(url: string, headers: Record<string, string>): Promise<number> {
  const payload = JSON.stringify({ model: 'bench', stream: true, messages: [] });
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = httpRequest(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(payload.length), ...headers } }, (res) => {
      let first: number | undefined;
      res.on('data', () => (first ??= performance.now() - started));
      res.on('end', () => resolve(first ?? NaN));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * The LLM gateway (BENCH_ONLY=llm), on a Docker server started with --proxy: a Chat request
 * through the gateway against the same request straight to the local fake provider, and the
 * first byte of a streamed answer both ways. The gateway's URL and token are read from a
 * sandbox's env, as a program in it would.
 */
export async function benchLlmGateway(api: Api, n: number): Promise<void> {
  const provider = await startFakeProvider();
  const name = `bench-llm-${process.pid}`;
  try {
    await send('PUT', `${api.url}/llm/keys/openai`, { value: 'sk-bench-key', base_url: provider.url });
    const created = await send('POST', `${api.url}/sandboxes`, { name });
    if (created.status !== 201) throw new Error(`create: ${created.status} ${created.body.toString()}`);
    const exec = await send('POST', `${api.url}/sandboxes/${name}/exec`, { command: ['sh', '-c', 'echo "$OPENAI_BASE_URL $OPENAI_API_KEY"'] });
    const [baseUrl = '', token = ''] = (JSON.parse(exec.body.toString()) as { data: { stdout: string } }).data.stdout.trim().split(' ');
    if (!baseUrl.startsWith('http')) throw new Error('the sandbox has no OPENAI_BASE_URL: is the server started with --proxy?');
    const body = { model: 'bench', messages: [] };
    const through = () => send('POST', `${baseUrl}/chat/completions`, body, { authorization: `Bearer ${token}` });
    const direct = () => send('POST', `${provider.url}/v1/chat/completions`, body, { authorization: 'Bearer sk-bench-key' });
    const json = await timePaired(n, through, direct, 20);
    report('LLM request, through the gateway', json.ours, json.plain, 'straight to the provider');
    const streamOurs: number[] = [];
    const streamPlain: number[] = [];
    const stream = await timePaired(
      Math.max(5, Math.round(n / 4)),
      // Warm-up rounds (i < 0) are not kept.
      async (i) => {
        const ms = await firstByte(`${baseUrl}/chat/completions`, { authorization: `Bearer ${token}` });
        if (i >= 0) streamOurs.push(ms);
      },
      async (i) => {
        const ms = await firstByte(`${provider.url}/v1/chat/completions`, { authorization: 'Bearer sk-bench-key' });
        if (i >= 0) streamPlain.push(ms);
      },
      2,
    );
    // The paired times are of whole streams; the first byte is what a user waits for.
    report('LLM stream, first byte via gateway', summarize(streamOurs), summarize(streamPlain), 'first byte, direct');
    report('LLM stream, whole answer via gateway', stream.ours, stream.plain, 'whole answer, direct');
  } finally {
    await send('DELETE', `${api.url}/sandboxes/${name}`);
    await provider.close();
  }
}
