import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../../helpers/server-process.js';

let server: ServerProcess | undefined;
let dataDir: string | undefined;
afterEach(async () => {
  await server?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

const MiB = 1024 * 1024;

describe('the 16 MiB body limit', () => {
  it("answers larger bodies with a 413 that Node's fetch reads, every time, and serves on", async () => {
    // A server in its own process (the built CLI, fake backend): in one process with the client,
    // the race between the client's writes and the server's close does not show.
    dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-unit-'));
    server = await startServer(dataDir, ['--backend', 'fake', '--pool-size', '0']);
    const { url } = server;
    const post = (path: string, body: string | Uint8Array, type = 'application/json', method = 'POST') =>
      fetch(url + path, { method, headers: { 'content-type': type }, body });
    expect((await post('/sandboxes', '{"name":"box"}')).status).toBe(201);
    const cases = [
      ['POST', '/sandboxes', 'application/json', 17],
      ['POST', '/nothing/here', 'application/json', 40],
      ['PUT', '/sandboxes/box/files/workspace/big.bin', 'application/octet-stream', 17],
    ] as const;
    const answers = new Map<string, number>();
    for (let round = 0; round < 8; round++) {
      for (const [method, path, type, size] of cases) {
        const res = await post(path, Buffer.alloc(size * MiB, 'a'), type, method).catch((err: Error) => err);
        const key = res instanceof Error ? `${res.message}: ${String(res.cause)}` : `${res.status} ${((await res.json()) as { error: string }).error}`;
        answers.set(key, (answers.get(key) ?? 0) + 1);
      }
    }
    expect([...answers]).toEqual([['413 request body exceeds the 16 MiB limit', 8 * cases.length]]);
    // A body sent in chunks (no Content-Length) that grows past the limit is answered the same way.
    const chunked = new ReadableStream({
      start(controller) {
        for (let i = 0; i < 17; i++) controller.enqueue(new Uint8Array(MiB));
        controller.close();
      },
    });
    const res = await fetch(`${url}/sandboxes/box/files/workspace/c.bin`, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: chunked,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });
});
