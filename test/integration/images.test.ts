import Dockerode from 'dockerode';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildHint, catalogEntryFor, DEFAULT_IMAGE } from '../../src/images/catalog.js';
import { buildImage, imageState, isImagePresent } from '../../src/images/image-builder.js';
import { buildLayer, layerContainerName } from '../../src/images/image-layer.js';
import { imageVersion, LABEL_IMAGE, LABEL_VERSION } from '../../src/images/image-recipe.js';

const docker = new Dockerode();
const base = catalogEntryFor('base')!;
const suffix = randomBytes(4).toString('hex');
const tempTags: string[] = [];

/** Runs `script` in a throwaway container of `image` as its default user; returns the output. */
async function runIn(image: string, script: string): Promise<string> {
  const output = new PassThrough();
  const chunks: Buffer[] = [];
  output.on('data', (chunk: Buffer) => chunks.push(chunk));
  const [result, container] = (await docker.run(image, ['bash', '-c', script], output, {
    name: `sandboxd-test-images-${suffix}`,
    Tty: true,
    HostConfig: { NetworkMode: 'none' },
  })) as [{ StatusCode: number }, Dockerode.Container];
  await container.remove({ force: true });
  expect(result.StatusCode).toBe(0);
  return Buffer.concat(chunks).toString('utf8').replace(/\r/g, '');
}

beforeAll(async () => {
  // The base image is built once per machine (~30 s) and then reused by every test suite.
  if ((await imageState(base, { docker })).state !== 'fresh') await buildImage('base', { docker });
}, 600_000);

afterAll(async () => {
  for (const tag of tempTags) await docker.getImage(tag).remove({ force: true }).catch(() => undefined);
});

describe('catalog', () => {
  it('defaults to the base image and says how to build it', () => {
    expect(DEFAULT_IMAGE).toBe(base.tag);
    expect(buildHint(DEFAULT_IMAGE)).toBe('build it with `sandboxd images build base`');
  });
});

describe('the base image', () => {
  it('carries the sandbox user, workdir and labels in its config', async () => {
    const info = await docker.getImage(base.tag).inspect();
    expect(info.Config.User).toBe('sandbox');
    expect(info.Config.WorkingDir).toBe('/workspace');
    expect(info.Config.Cmd).toEqual(['/bin/bash']);
    expect(info.Config.Env).toEqual(expect.arrayContaining(['HOME=/home/sandbox']));
    expect(info.Config.Labels).toMatchObject({ [LABEL_IMAGE]: 'base', [LABEL_VERSION]: imageVersion(base) });
  });

  it('runs as uid 1000 in a /workspace it owns, with the base tools', async () => {
    const out = await runIn(
      base.tag,
      'id -u; id -g; id -un; pwd; stat -c %u:%g /workspace; echo ok > /workspace/probe && cat /workspace/probe;' +
        'for tool in bash git python3 curl ps less xz; do command -v $tool >/dev/null || echo missing $tool; done;' +
        'ls /var/lib/apt/lists | grep -c _Packages || true',
    );
    expect(out.trim().split('\n')).toEqual(['1000', '1000', 'sandbox', '/workspace', '1000:1000', 'ok', '0']);
  });

  it('is not rebuilt when present and up to date', async () => {
    const before = await docker.getImage(base.tag).inspect();
    const result = await buildImage('base', { docker });
    expect(result).toMatchObject({ skipped: true, tag: base.tag, imageId: before.Id, version: imageVersion(base) });
    expect(result.durationMs).toBeLessThan(5_000);
  });
});

describe('image state', () => {
  it('tells a stale image (old version label) from a missing one', async () => {
    const tag = `sandboxd-test/stale-${suffix}:bookworm`;
    const dir = await mkdtemp(join(tmpdir(), 'sandboxd-test-'));
    try {
      await writeFile(join(dir, 'hello'), 'hello\n');
      await promisify(execFile)('tar', ['-cf', join(dir, 'tiny.tar'), '-C', dir, 'hello']);
      tempTags.push(tag);
      const stream = await docker.importImage(join(dir, 'tiny.tar'), {
        repo: tag.split(':')[0],
        tag: 'bookworm',
        changes: [`LABEL ${LABEL_IMAGE}=base ${LABEL_VERSION}=old`],
      });
      await new Promise((resolve, reject) => {
        docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve(null)));
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(await isImagePresent(tag, docker)).toBe(true);
    expect((await imageState(base, { docker, tag })).state).toBe('stale');
    await docker.getImage(tag).remove({ force: true });
    expect(await isImagePresent(tag, docker)).toBe(false);
    expect((await imageState(base, { docker, tag })).state).toBe('absent');
  });
});

describe('build errors', () => {
  it('rejects an unknown image with the catalog names', async () => {
    await expect(buildImage('nope', { docker })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringContaining('base, python, node'),
    });
  });

  it('says how to install mmdebstrap when it is missing, leaving no temp files', async () => {
    const tag = `sandboxd-test/nomm-${suffix}:bookworm`;
    const leftovers = async () => (await readdir(tmpdir())).filter((f) => f.startsWith('sandboxd-image-')).length;
    const before = await leftovers();
    const path = process.env.PATH;
    process.env.PATH = '/nonexistent';
    try {
      await expect(buildImage('base', { docker, tag })).rejects.toThrow(/apt-get install mmdebstrap/);
    } finally {
      process.env.PATH = path;
    }
    expect(await leftovers()).toBe(before);
    expect(await isImagePresent(tag, docker)).toBe(false);
  });
});

describe('a layer image (python on base)', () => {
  const tag = `sandboxd-test/python-${suffix}:bookworm`;
  const python = catalogEntryFor('python')!;
  const containerGone = async (name: string) => (await docker.listContainers({ all: true, filters: { name: [name] } })).length === 0;

  it('is the base image plus one layer, with the catalog user, environment and labels, and nothing of its build', async () => {
    tempTags.push(tag);
    // A build cut short by kill -9 leaves its container: the next build of the image removes it.
    await docker.createContainer({ name: layerContainerName(python), Image: base.tag, Cmd: ['true'] });
    const lines: string[] = [];
    const result = await buildImage('python', { docker, tag, onProgress: (line) => lines.push(line) });
    expect(result).toMatchObject({ skipped: false, tag, version: imageVersion(python) });
    expect(lines).toContain('[layer] on sandboxd/base:bookworm: python3-pip python3-venv');
    const [layer, below] = await Promise.all([docker.getImage(tag).inspect(), docker.getImage(base.tag).inspect()]);
    expect(layer.RootFS.Layers?.slice(0, -1)).toEqual(below.RootFS.Layers);
    expect(layer.Config).toMatchObject({ User: 'sandbox', WorkingDir: '/workspace', Cmd: ['/bin/bash'] });
    expect(layer.Config.Env).toEqual(expect.arrayContaining(['HOME=/home/sandbox', 'LANG=C.UTF-8', 'PIP_BREAK_SYSTEM_PACKAGES=1']));
    expect(layer.Config.Labels).toMatchObject({ [LABEL_IMAGE]: 'python', [LABEL_VERSION]: imageVersion(python) });
    const out = await runIn(tag, 'id -un; find /var/lib/apt/lists /var/cache/apt/archives /tmp -mindepth 1 -maxdepth 1 ! -name lock ! -name partial; python3 -m venv /tmp/v && /tmp/v/bin/pip --version >/dev/null && echo venv');
    expect(out.trim().split('\n')).toEqual(['sandbox', 'venv']);
    expect(await containerGone(layerContainerName(python))).toBe(true);
  }, 300_000);

  it('fails with the tail of what apt said, leaving no container and no image', async () => {
    const broken = { ...python, name: `broken-${suffix}`, packages: ['sandboxd-no-such-package'] };
    const brokenTag = `sandboxd-test/broken-${suffix}:bookworm`;
    await expect(buildLayer(docker, broken, base.tag, brokenTag, tmpdir(), () => undefined)).rejects.toMatchObject({
      code: 'IMAGE_UNAVAILABLE',
      message: expect.stringMatching(/exit code 100[^]*Unable to locate package sandboxd-no-such-package/),
    });
    expect(await containerGone(layerContainerName(broken))).toBe(true);
    expect(await isImagePresent(brokenTag, docker)).toBe(false);
  }, 300_000);
});
