import { afterEach, describe, expect, it, vi } from 'vitest';
import { prefersRawBytes } from '../../../../src/http/routes/file-routes.js';
import { decodeBase64 } from '../../../../src/services/sandboxes/file-service.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const RAW = 'application/octet-stream';
/** Every byte value, NUL and invalid UTF-8 included. */
const BINARY = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7) % 256));

async function sandbox(name = 'files'): Promise<string> {
  h = await fakeHarness();
  await h.services.sandboxes.create({ name });
  return name;
}

/** The bytes the fake backend holds at `path` of the sandbox. */
async function stored(name: string, path: string): Promise<Buffer | undefined> {
  const { backend_id: backendId } = await h.services.sandboxes.requireRunning(name);
  return h.backend.instances.get(backendId)!.files.get(path);
}

describe('raw file bytes (application/octet-stream)', () => {
  it('writes the body of a raw PUT as the file, byte for byte, and audits it', async () => {
    const name = await sandbox();
    const res = await h.app.inject({ method: 'PUT', url: `/sandboxes/${name}/files/tmp/blob.bin`, headers: { 'content-type': RAW }, payload: BINARY });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, data: 'wrote 512 bytes to /tmp/blob.bin' });
    expect(await stored(name, '/tmp/blob.bin')).toEqual(BINARY);
    const entries = await h.services.logs(name);
    expect(entries.at(-1)).toMatchObject({ event: 'file_written', path: '/tmp/blob.bin', bytes: 512 });
  });

  it('writes an empty raw body as an empty file', async () => {
    const name = await sandbox();
    const res = await h.app.inject({ method: 'PUT', url: `/sandboxes/${name}/files/tmp/empty`, headers: { 'content-type': RAW }, payload: Buffer.alloc(0) });
    expect(res.json()).toEqual({ success: true, data: 'wrote 0 bytes to /tmp/empty' });
    expect(await stored(name, '/tmp/empty')).toEqual(Buffer.alloc(0));
  });

  it('answers GET with Accept: application/octet-stream with the bytes, and JSON otherwise', async () => {
    const name = await sandbox();
    await h.services.files.writeBytes(name, '/tmp/blob.bin', BINARY);
    const raw = await h.app.inject({ url: `/sandboxes/${name}/files/tmp/blob.bin`, headers: { accept: RAW } });
    expect(raw.statusCode).toBe(200);
    expect(raw.headers['content-type']).toBe(RAW);
    // Streamed: chunked, without a length.
    expect(raw.rawPayload).toEqual(BINARY);
    const json = await h.app.inject({ url: `/sandboxes/${name}/files/tmp/blob.bin` });
    expect(json.headers['content-type']).toContain('application/json');
    expect(json.json()).toEqual({ success: true, data: { content: BINARY.toString('base64'), encoding: 'base64', size: 512 } });
    expect((await h.services.logs(name)).filter((e) => e.event === 'file_read')).toHaveLength(2);
  });

  it('keeps errors in the JSON envelope whatever the client accepts', async () => {
    const name = await sandbox();
    const headers = { accept: RAW };
    const missing = await h.app.inject({ url: `/sandboxes/${name}/files/tmp/nope`, headers });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ success: false, error: "file '/tmp/nope' not found", code: 'NOT_FOUND' });
    expect((await h.app.inject({ url: '/sandboxes/ghost/files/tmp/x', headers })).json().code).toBe('NOT_FOUND');
    expect((await h.app.inject({ url: `/sandboxes/${name}/files/tmp/a%00b`, headers })).statusCode).toBe(400);
    await h.services.sandboxes.stop(name);
    const stopped = await h.app.inject({ url: `/sandboxes/${name}/files/tmp/x`, headers });
    expect(stopped.statusCode).toBe(409);
    expect(stopped.json().error).toContain('start it with POST');
  });

  it('refuses raw writes that no file write would accept', async () => {
    const name = await sandbox();
    const put = (url: string) => h.app.inject({ method: 'PUT', url, headers: { 'content-type': RAW }, payload: Buffer.from('x') });
    expect((await put('/sandboxes/ghost/files/tmp/x')).statusCode).toBe(404);
    const nul = await put(`/sandboxes/${name}/files/tmp/a%00b`);
    expect(nul.statusCode).toBe(400);
    expect(nul.json().error).toBe('path: must not contain NUL bytes');
    await h.services.sandboxes.stop(name);
    expect((await put(`/sandboxes/${name}/files/tmp/x`)).statusCode).toBe(409);
  });

  it('refuses raw bodies over 16 MiB with 413', async () => {
    const name = await sandbox();
    const url = `/sandboxes/${name}/files/tmp/big`;
    const over = await h.app.inject({ method: 'PUT', url, headers: { 'content-type': RAW }, payload: Buffer.alloc(16 * 1024 * 1024 + 1) });
    expect(over.statusCode).toBe(413);
    expect(over.json()).toMatchObject({ success: false, code: 'PAYLOAD_TOO_LARGE' });
    const limit = await h.app.inject({ method: 'PUT', url, headers: { 'content-type': RAW }, payload: Buffer.alloc(16 * 1024 * 1024) });
    expect(limit.statusCode).toBe(200);
  });

  it('takes raw bytes only where one file is written', async () => {
    const name = await sandbox();
    const multi = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/files`, headers: { 'content-type': RAW }, payload: Buffer.from('{"files":{}}') });
    expect(multi.statusCode).toBe(400);
    const exec = await h.app.inject({ method: 'POST', url: `/sandboxes/${name}/exec`, headers: { 'content-type': RAW }, payload: Buffer.from('{"command":["true"]}') });
    expect(exec.statusCode).toBe(200);
  });

  it('keeps the JSON form of PUT and its messages', async () => {
    const name = await sandbox();
    const url = `/sandboxes/${name}/files/tmp/x`;
    const cases: [unknown, string][] = [
      [{}, 'content: is required'],
      [{ content: 1 }, 'content: must be a string'],
      [{ content: 'x', encoding: 'hex' }, 'encoding: must be utf8 or base64'],
      [{ content: 'x', colour: 'red' }, "unknown field 'colour'"],
      [{ content: 'QUJD=', encoding: 'base64' }, 'content: is not valid base64'],
      ['text', 'raw bytes with Content-Type: application/octet-stream'],
    ];
    for (const [payload, message] of cases) {
      const res = await h.app.inject({ method: 'PUT', url, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error, JSON.stringify(payload)).toContain(message);
    }
    const none = await h.app.inject({ method: 'PUT', url });
    expect(none.json().error).toBe('body: a JSON object {content, encoding} or raw bytes with Content-Type: application/octet-stream is required');
    const ok = await h.app.inject({ method: 'PUT', url, payload: { content: 'AAE=', encoding: 'base64' } });
    expect(ok.json()).toEqual({ success: true, data: 'wrote 2 bytes to /tmp/x' });
  });

  it('documents both forms in the OpenAPI document', async () => {
    h = await fakeHarness();
    const doc = (await h.app.inject({ url: '/openapi.json' })).json();
    const path = doc.paths['/sandboxes/{name}/files/{path}'];
    expect(path.put.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/WriteFile' });
    expect(path.put.requestBody.content[RAW].schema).toEqual({ type: 'string', format: 'binary' });
    expect(path.get.responses['200'].content['application/json'].schema.properties.data).toEqual({ $ref: '#/components/schemas/FileContent' });
    expect(path.get.responses['200'].content[RAW].schema).toEqual({ type: 'string', format: 'binary' });
    expect(Object.keys(path.get.responses)).toEqual(expect.arrayContaining(['200', '404', '409']));
  });
});

describe('content negotiation', () => {
  it('gives raw bytes only when they are asked for above JSON', () => {
    expect(prefersRawBytes(undefined)).toBe(false);
    expect(prefersRawBytes('*/*')).toBe(false);
    expect(prefersRawBytes('application/json')).toBe(false);
    expect(prefersRawBytes(RAW)).toBe(true);
    expect(prefersRawBytes('application/octet-stream, */*;q=0.1')).toBe(true);
    expect(prefersRawBytes('application/octet-stream;q=0.5, application/json;q=0.9')).toBe(false);
    expect(prefersRawBytes('application/json;q=0.5, application/octet-stream')).toBe(true);
    expect(prefersRawBytes('application/json, application/octet-stream')).toBe(false);
    expect(prefersRawBytes('application/octet-stream, application/json')).toBe(true);
    expect(prefersRawBytes('application/octet-stream;q=0')).toBe(false);
    expect(prefersRawBytes('application/octet-stream;q=bogus')).toBe(false);
  });
});

describe('strict base64', () => {
  it('decodes padded standard base64 and refuses everything else', () => {
    expect(decodeBase64('')).toEqual(Buffer.alloc(0));
    expect(decodeBase64('QUJD')).toEqual(Buffer.from('ABC'));
    expect(decodeBase64('QUI=')).toEqual(Buffer.from('AB'));
    expect(decodeBase64('QQ==')).toEqual(Buffer.from('A'));
    expect(decodeBase64(BINARY.toString('base64'))).toEqual(BINARY);
    for (const bad of ['QUJ', 'QUJD=', 'Q===', '====', 'QQ==QUJD', 'QU JD', 'QUJ\n', 'QU-_', '+/-_', 'QUJ*', 'QUĽD', 'QUJĀ', 'Q\u0141==']) {
      expect(decodeBase64(bad), JSON.stringify(bad)).toBeUndefined();
    }
  });
});

describe('large files in the JSON form (base64)', () => {
  const MiB = Buffer.from(Array.from({ length: 1024 * 1024 }, (_, i) => (i * 31 + 7) % 256));

  it('reads a binary file as the envelope the serializer would write, without serialising the big string', async () => {
    const name = await sandbox();
    const { backend_id: backendId } = await h.services.sandboxes.requireRunning(name);
    h.backend.instances.get(backendId)!.files.set('/tmp/big.bin', MiB);
    const expected = JSON.stringify({ success: true, data: { content: MiB.toString('base64'), encoding: 'base64', size: MiB.length } });
    const stringify = vi.spyOn(JSON, 'stringify');
    let res;
    try {
      res = await h.app.inject({ method: 'GET', url: `/sandboxes/${name}/files/tmp/big.bin` });
      // Assembled as bytes: nothing stringified the envelope with its 1.4 MB of base64.
      expect(stringify.mock.calls.filter(([value]) => typeof value === 'object' && value !== null && 'data' in value)).toHaveLength(0);
    } finally {
      stringify.mockRestore();
    }
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.body).toBe(expected);
  });

  it('parses a JSON write without scanning the whole body for prototype keys, and still refuses them', async () => {
    const name = await sandbox();
    const body = JSON.stringify({ content: MiB.toString('base64'), encoding: 'base64' });
    const test = vi.spyOn(RegExp.prototype, 'test');
    try {
      const res = await h.app.inject({ method: 'PUT', url: `/sandboxes/${name}/files/tmp/big.bin`, headers: { 'content-type': 'application/json' }, payload: body });
      expect(res.statusCode).toBe(200);
      expect(test.mock.calls.filter(([text]) => String(text).length >= MiB.length)).toHaveLength(0);
    } finally {
      test.mockRestore();
    }
    expect((await stored(name, '/tmp/big.bin'))?.equals(MiB)).toBe(true);
    for (const key of ['__proto__', 'constructor']) {
      const res = await h.app.inject({
        method: 'PUT',
        url: `/sandboxes/${name}/files/tmp/x`,
        headers: { 'content-type': 'application/json' },
        payload: `{"content": "x", "${key}": {"polluted": true}}`,
      });
      expect(res.statusCode).toBe(400);
    }
    const malformed = await h.app.inject({ method: 'PUT', url: `/sandboxes/${name}/files/tmp/x`, headers: { 'content-type': 'application/json' }, payload: '{"content": ' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error).toMatch(/malformed JSON body/);
  });
});
