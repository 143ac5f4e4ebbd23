import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request the fake provider received. */
export interface UpstreamRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** The usage the fake reported in its last answer: what the gateway must count. */
export interface ReportedUsage {
  input: number;
  output: number;
  model: string;
}

/**
 * A local stand-in for the providers' APIs (no internet in tests), speaking each format the
 * gateway meters: OpenAI Chat (JSON, SSE with and without include_usage), OpenAI Responses
 * (JSON, SSE), Anthropic Messages (JSON, SSE), Gemini generateContent (JSON, SSE, JSON array).
 * Every answer reports random token counts, kept in `reported`, so a test compares what the
 * gateway counted with what the provider said. `/fail` drops the connection; `/status/<n>`
 * answers n. Listens on 127.0.0.1, or `host` (a sandbox reaches it on the bridge address).
 */
export class FakeLlmUpstream {
  readonly requests: UpstreamRequest[] = [];
  readonly reported: ReportedUsage[] = [];
  /** Milliseconds between SSE events. */
  eventGapMs = 0;
  private server: Server | undefined;

  async start(host = '127.0.0.1'): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        this.requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
        void this.answer(req.url ?? '/', body, res);
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, host, resolve));
    return `http://${host}:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
  }

  /** Total tokens reported so far. */
  totals(): { input: number; output: number } {
    return this.reported.reduce((t, u) => ({ input: t.input + u.input, output: t.output + u.output }), { input: 0, output: 0 });
  }

  private usage(model: string): ReportedUsage {
    const usage = { input: 1 + Math.floor(Math.random() * 5000), output: 1 + Math.floor(Math.random() * 2000), model };
    this.reported.push(usage);
    return usage;
  }

  private async answer(url: string, text: string, res: import('node:http').ServerResponse): Promise<void> {
    const path = url.split('?')[0]!;
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    const model = typeof body.model === 'string' ? body.model : (/models\/([^/:]+)/.exec(path)?.[1] ?? 'unknown');
    const json = (value: unknown, status = 200) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(value));
    };
    const sse = async (events: unknown[]) => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      for (const event of events) {
        res.write(typeof event === 'string' ? event : `data: ${JSON.stringify(event)}\n\n`);
        if (this.eventGapMs > 0) await new Promise((r) => setTimeout(r, this.eventGapMs));
      }
      res.end();
    };
    if (path === '/fail') return void res.socket?.destroy();
    // A careless server that echoes the credentials it got, split across writes.
    if (path === '/echo') {
      const echoed = JSON.stringify({ error: { message: `bad key: ${String(this.requests.at(-1)?.headers.authorization)}` } });
      res.writeHead(401, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(echoed) });
      const middle = Math.floor(echoed.length / 2) + 3;
      res.write(echoed.slice(0, middle));
      return void setTimeout(() => res.end(echoed.slice(middle)), 5);
    }
    const status = /^\/status\/(\d{3})$/.exec(path);
    if (status) return json({ error: { message: 'scripted failure' } }, Number(status[1]));

    if (path.endsWith('/chat/completions')) {
      const chunk = (content: string) => ({ id: 'c1', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content } }] });
      if (body.stream !== true) {
        const u = this.usage(model);
        return json({ id: 'c1', object: 'chat.completion', model, choices: [{ index: 0, message: { role: 'assistant', content: 'hi' } }], usage: { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output } });
      }
      const withUsage = (body.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
      const events: unknown[] = [chunk('Hel'), chunk('lo')];
      if (withUsage) {
        const u = this.usage(model);
        events.push({ id: 'c1', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: u.input, completion_tokens: u.output } });
      }
      return sse([...events, 'data: [DONE]\n\n']);
    }
    if (path.endsWith('/responses')) {
      const u = this.usage(model);
      const response = { id: 'r1', object: 'response', model, status: 'completed', usage: { input_tokens: u.input, output_tokens: u.output, total_tokens: u.input + u.output } };
      if (body.stream !== true) return json(response);
      return sse([
        `event: response.created\ndata: ${JSON.stringify({ type: 'response.created', response: { ...response, status: 'in_progress', usage: null } })}\n\n`,
        `event: response.output_text.delta\ndata: ${JSON.stringify({ type: 'response.output_text.delta', delta: 'Hi' })}\n\n`,
        `event: response.completed\ndata: ${JSON.stringify({ type: 'response.completed', response })}\n\n`,
      ]);
    }
    if (path.endsWith('/messages')) {
      const u = this.usage(model);
      if (body.stream !== true) {
        return json({ id: 'm1', type: 'message', model, content: [{ type: 'text', text: 'hi' }], usage: { input_tokens: u.input, output_tokens: u.output } });
      }
      const event = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
      return sse([
        event('message_start', { type: 'message_start', message: { id: 'm1', type: 'message', model, usage: { input_tokens: u.input, output_tokens: 1 } } }),
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }),
        event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: u.output } }),
        event('message_stop', { type: 'message_stop' }),
      ]);
    }
    if (path.includes(':generateContent') || path.includes(':streamGenerateContent')) {
      const u = this.usage(model);
      const part = (text: string, final: boolean) => ({
        candidates: [{ content: { parts: [{ text }], role: 'model' } }],
        modelVersion: model,
        usageMetadata: final ? { promptTokenCount: u.input, candidatesTokenCount: u.output, totalTokenCount: u.input + u.output } : { promptTokenCount: u.input },
      });
      if (path.includes(':generateContent')) return json(part('hi', true));
      if (url.includes('alt=sse')) return sse([part('Hel', false), part('lo', true)]);
      return json([part('Hel', false), part('lo', true)]);
    }
    json({ error: { message: `the fake provider has no ${path}` } }, 404);
  }
}
