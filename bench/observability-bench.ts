import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { send } from './http-client.js';
import { report, timePaired } from './stats.js';

interface Api {
  url: string;
}

/** A local HTTP sink that answers 200 to everything: webhook receiver and OTLP collector. */
export async function startSink(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function exec(api: Api, name: string): Promise<void> {
  const res = await send('POST', `${api.url}/sandboxes/${name}/exec`, { command: ['true'] });
  if (res.status !== 200) throw new Error(`exec: ${res.status}`);
}

/**
 * The cost of observability per request: exec on the fake backend through a server with
 * tracing (OTLP export), the event bus, a webhook and a connected GET /events client, against
 * the same exec through a server with none of them (metrics are always on in both).
 */
export async function benchObservability(observed: Api, bare: Api, n: number): Promise<void> {
  const name = `bench-obs-${process.pid}`;
  for (const api of [observed, bare]) {
    await send('POST', `${api.url}/sandboxes`, { name });
  }
  const stream = new AbortController();
  const events = await fetch(`${observed.url}/events`, { signal: stream.signal });
  void events.body!.pipeTo(new WritableStream()).catch(() => undefined);
  const { ours, plain } = await timePaired(
    n,
    () => exec(observed, name),
    () => exec(bare, name),
    20,
  );
  stream.abort();
  for (const api of [observed, bare]) await send('DELETE', `${api.url}/sandboxes/${name}`);
  report('exec, observability on (fake)', ours, plain, 'observability off');
}
