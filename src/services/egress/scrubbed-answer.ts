import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable, Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { scrubHeader, SecretScrubber, type Replacement } from './secret-scrubber.js';

/** Decoders of the content codings an answer may come in, to read it for secret values. */
const DECODERS: Record<string, () => Transform> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
  br: createBrotliDecompress,
};

/**
 * Streams an upstream's answer (`headers` already without hop-by-hop ones) to the sandbox.
 * With `scrub` (a request that carried secret values), every value is replaced by its
 * placeholder in the headers and the body, chunk by chunk: the length changes, so the answer
 * goes without Content-Length, and a compressed one (gzip, deflate, br) is decompressed first
 * and goes without Content-Encoding; one in a coding the proxy cannot read is refused (502).
 */
export function relayAnswer(
  answer: IncomingMessage,
  response: ServerResponse,
  headers: IncomingHttpHeaders,
  scrub: readonly Replacement[],
  on: { received(bytes: number): void; done(): void },
): void {
  const status = answer.statusCode ?? 502;
  answer.on('data', (chunk: Buffer) => on.received(chunk.length));
  let body: Readable = answer;
  let scrubber: SecretScrubber | undefined;
  let out: IncomingHttpHeaders = headers;
  if (scrub.length > 0) {
    out = Object.fromEntries(Object.entries(headers).map(([name, value]) => [name, scrubHeader(value, scrub)]));
    delete out['content-length'];
    const coding = String(out['content-encoding'] ?? '').trim().toLowerCase();
    if (coding !== '' && coding !== 'identity') {
      const decoder = DECODERS[coding];
      if (!decoder) {
        answer.resume();
        const message = `the upstream answered in the content coding '${coding.slice(0, 100)}', which the proxy cannot read to keep the secret's value out of the answer (send Accept-Encoding: gzip, br or identity)\n`;
        response.writeHead(502, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(message) });
        response.end(message);
        on.done();
        return;
      }
      delete out['content-encoding'];
      const decoding = decoder();
      answer.pipe(decoding);
      body = decoding;
    }
    scrubber = new SecretScrubber(scrub);
  }
  response.writeHead(status, answer.statusMessage, out as OutgoingHttpHeaders);
  body.on('data', (chunk: Buffer) => {
    const clean = scrubber ? scrubber.push(chunk) : chunk;
    if (clean.length > 0 && !response.write(clean)) body.pause();
  });
  response.on('drain', () => body.resume());
  body.on('end', () => {
    const rest = scrubber?.flush();
    if (rest && rest.length > 0) response.end(rest);
    else response.end();
    on.done();
  });
  const fail = () => {
    response.destroy();
    on.done();
  };
  body.on('error', fail);
  if (body !== answer) answer.on('error', fail);
}
