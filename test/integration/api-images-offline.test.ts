import Dockerode from 'dockerode';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tarArchive } from '../helpers/tar-archive.js';
import { BASE_IMAGE, call, dockerRuntime, type DockerRuntime } from '../helpers/docker-runtime.js';

/**
 * Offline builds, as an attacker tries them on the real engine: every way a Dockerfile could
 * make the daemon reach a registry or a URL names a listener on 127.0.0.1, which must see no
 * connection at all (not even a TLS hello), while the API answers 400 naming the line.
 */

let rt: DockerRuntime;
let listener: Server;
let port = 0;
const connections: string[] = [];
const docker = new Dockerode();
const run = `${process.pid}-${Math.random().toString(36).slice(2, 6)}`;
const triggerTag = `sandboxd-test-onbuild-${run}:1`;

beforeAll(async () => {
  listener = createServer((socket: Socket) => {
    socket.once('data', (chunk) => connections.push(chunk.toString('latin1').slice(0, 40)));
    connections.push(`connection from ${socket.remoteAddress}`);
    socket.end();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as AddressInfo).port;
  rt = await dockerRuntime({ poolSize: 0 });
});

afterAll(async () => {
  await rt?.dispose();
  await docker.getImage(triggerTag).remove().catch(() => undefined);
  await new Promise((resolve) => listener.close(resolve));
});

describe('offline image builds', () => {
  it('refuse every Dockerfile that would make the engine fetch, naming the line, before the engine sees it', async () => {
    const registry = `127.0.0.1:${port}`;
    const cases: Array<[string, string[], RegExp]> = [
      ['COPY --from of a registry image', [`FROM ${BASE_IMAGE}`, `COPY --from=${registry}/img:1 /etc/hostname /x`], /^dockerfile: line 2: COPY --from=127\.0\.0\.1:\d+\/img:1: no such image on this engine, and builds pull nothing/],
      ['a second FROM behind an escape directive', ['# escape=`', `FROM ${BASE_IMAGE}`, 'RUN echo hidden \\', `FROM ${registry}/img:1`], /^dockerfile: line 4: FROM 127\.0\.0\.1:\d+\/img:1: no such image/],
      ['FROM through a meta ARG', [`ARG REG=${registry}`, 'FROM ${REG}/img:1'], /^dockerfile: line 2: FROM 127\.0\.0\.1:\d+\/img:1: no such image/],
      ['COPY --from of the stage being built (the engine reads it as an image)', [`FROM ${BASE_IMAGE} AS self`, 'COPY --from=self /etc/hostname /x'], /^dockerfile: line 2: COPY --from=self: no such image/],
      ['ADD of a URL', [`FROM ${BASE_IMAGE}`, `ADD http://${registry}/file /file`], /^dockerfile: line 2: ADD http:\/\/127\.0\.0\.1:\d+\/file: builds fetch nothing/],
      ['ADD of a URL with an escaped colon', [`FROM ${BASE_IMAGE}`, `ADD http\\://${registry}/file /file`], /^dockerfile: line 2: ADD http:\/\/127/],
      ['RUN --mount from a registry image', [`FROM ${BASE_IMAGE}`, `RUN --mount=type=bind,from=${registry}/img:1,target=/m true`], /^dockerfile: line 2: RUN --mount=from=127\.0\.0\.1:\d+\/img:1: no such image/],
      ['ONBUILD COPY --from', [`FROM ${BASE_IMAGE}`, `ONBUILD COPY --from=${registry}/img:1 /a /b`], /^dockerfile: line 2: ONBUILD COPY --from/],
      ['FROM --platform', [`FROM --platform=linux/arm64 ${BASE_IMAGE}`], /^dockerfile: line 1: FROM --platform/],
      ['a heredoc', [`FROM ${BASE_IMAGE}`, 'RUN <<EOF', `FROM ${registry}/img:1`, 'EOF'], /^dockerfile: line 2: RUN with a heredoc/],
    ];
    const answers = [];
    for (const [, lines] of cases) answers.push(await call(rt.url, 'POST', '/images', { name: `offline-${run}`, dockerfile: `${lines.join('\n')}\n` }));
    // The daemon could still be on its way: give it the time a pull takes to start.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(connections).toEqual([]);
    for (const [i, [what, , message]] of cases.entries()) {
      expect(answers[i]?.status, `${what}: ${JSON.stringify(answers[i]?.body)}`).toBe(400);
      expect(answers[i]?.body.error, what).toMatch(message);
    }
  });

  it("refuses a local base image whose ONBUILD trigger would fetch, and builds from one whose triggers are local", async () => {
    // An image made on the engine directly (not through sandboxd) with a trigger that names the listener.
    const context = await tarArchive([{ type: 'file', path: 'Dockerfile', mode: 0o644, content: Buffer.from(`FROM ${BASE_IMAGE}\nONBUILD COPY --from=127.0.0.1:${port}/img:1 /a /b\n`) }]);
    const stream = await docker.buildImage(Readable.from([context]), { t: triggerTag, networkmode: 'none' });
    await new Promise((resolve, reject) => docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve(undefined))));
    const answer = await call(rt.url, 'POST', '/images', { name: `onbuild-${run}`, dockerfile: `FROM ${triggerTag}\nRUN true\n` });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(connections).toEqual([]);
    expect(answer.status, JSON.stringify(answer.body)).toBe(400);
    expect(answer.body.error).toMatch(new RegExp(`^dockerfile: line 1: FROM ${triggerTag.replace(/[.:]/g, '\\$&')}: the image's ONBUILD COPY --from=127\\.0\\.0\\.1:${port}/img:1 /a /b: ONBUILD COPY --from`));

    // Stages and local images by every form the engine reads stay allowed.
    const name = `staged-${run}`;
    const built = await call(rt.url, 'POST', '/images', {
      name,
      dockerfile: ['# escape=`', `ARG BASE=${BASE_IMAGE}`, 'FROM ${BASE} AS first', 'USER root', 'RUN echo one > /one', `FROM ${BASE_IMAGE}`, 'COPY --from=first /one /copied-by-name', 'COPY --from=0 /one /copied-by-index', 'RUN cat /copied-by-name `', '  /copied-by-index'].join('\n'),
    });
    expect(built.status, JSON.stringify(built.body)).toBe(201);
    expect((await call(rt.url, 'DELETE', `/images/${name}`)).status).toBe(200);
  });
});
