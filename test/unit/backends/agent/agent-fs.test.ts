import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClient } from '../../../../src/backends/agent/agent-client.js';
import { listDirectory, statPath, watchPath } from '../../../../src/backends/agent/agent-fs.js';
import { UnixSocketTransport } from '../../../../src/backends/agent/agent-transport.js';

let dir: string | undefined;
let server: Server | undefined;
let client: AgentClient | undefined;
afterEach(() => {
  client?.close();
  server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A client of a fake agent that answers with `handler`. */
async function agentAnswering(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<AgentClient> {
  dir = mkdtempSync(join(tmpdir(), 'sandboxd-agent-fs-'));
  const socket = join(dir, 'agent.sock');
  server = createServer(handler);
  await new Promise<void>((resolve) => server!.listen(socket, resolve));
  client = new AgentClient(new UnixSocketTransport(async () => socket));
  return client;
}

describe('file views through the agent', () => {
  it('reads a view, and a watch line by line however the lines are cut', async () => {
    const agent = await agentAnswering((req, res) => {
      if (req.url!.startsWith('/v1/files?op=stat')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"path":"/a","name":"a","type":"file","size":1,"mode":"0644","mtime":"t"}');
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      res.write('{"event":"created","path":"/w/€');
      setTimeout(() => res.end('","type":"file"}\n{"event":"error","message":"m"}\n'), 20);
    });
    expect(await statPath(agent, '/a')).toEqual({ name: 'a', type: 'file', size: 1, mode: '0644', mtime: 't' });
    const events = [];
    for await (const event of await watchPath(agent, '/w', { recursive: true, signal: new AbortController().signal })) events.push(event);
    expect(events).toEqual([{ event: 'created', path: '/w/€', type: 'file' }, { event: 'error', message: 'm' }]);
  });

  it('answers UNSUPPORTED for an agent that predates views, NOT_FOUND for its own 404', async () => {
    const agent = await agentAnswering((req, res) => {
      if (req.url!.startsWith('/v1/fs/watch')) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('404 page not found');
      if (req.url!.includes('op=list')) return void res.writeHead(400, { 'content-type': 'application/json' }).end(`{"error":"'/d' is a directory"}`);
      if (req.url!.includes('path=%2Fmissing')) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end('{"a file":"that looks like JSON"}');
    });
    await expect(listDirectory(agent, '/d')).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    await expect(statPath(agent, '/f')).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    await expect(watchPath(agent, '/w', { recursive: true, signal: new AbortController().signal })).rejects.toMatchObject({ code: 'UNSUPPORTED' });
    await expect(statPath(agent, '/missing')).rejects.toMatchObject({ code: 'NOT_FOUND', message: "path '/missing' not found" });
  });
});
