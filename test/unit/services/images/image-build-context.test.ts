import { describe, expect, it } from 'vitest';
import type { Backend, BuiltImage, ImageBuildCapability } from '../../../../src/backends/backend.js';
import { readTar, tarArchive } from '../../../../src/images/tar-archive.js';
import { ImageService } from '../../../../src/services/images/image-service.js';

/** An engine that has every FROM image and builds nothing: only the build context is under test. */
const builds: ImageBuildCapability = {
  build: async () => {
    throw new Error('not built in this test');
  },
  inspect: async (reference): Promise<BuiltImage> => ({ id: 'sha256:base', tag: reference, sizeBytes: 1, createdAt: '2026-01-01T00:00:00.000Z' }),
  listLabelled: async () => [],
  remove: async () => undefined,
  sweep: async () => ({ containers: 0, images: 0 }),
  tag: async () => undefined,
};
const images = new ImageService({ backend: { capabilities: { imageBuild: builds } } as Backend, store: { statements: {}, deploymentId: 'ctxtest' }, config: { buildConcurrency: 64 } } as unknown as ConstructorParameters<typeof ImageService>[0]);
/** The Dockerfile as the engine gets it: each stage labelled with the build's id. */
const labelled = (text: string, buildId: string) => text.replace(/^(FROM .*)$/gm, `$1\nLABEL sandboxd.build="${buildId}"`);
const b64 = (text: string) => Buffer.from(text).toString('base64');
const listing = async (context: Buffer) => (await readTar(context)).map(({ header, content }) => [header.name, content.toString()]);

describe('the build context an image build sends', () => {
  it('holds files with paths past ustar\'s 100 and 255 bytes (PAX) beside the Dockerfile', async () => {
    const long = `${'a'.repeat(120)}.txt`;
    const deep = `${'dir/'.repeat(70)}file.txt`;
    const prepared = await images.prepare({ name: 'ctx', dockerfile: 'FROM sandboxd/base:bookworm\n', files: { [long]: b64('long'), [deep]: b64('deep') } });
    expect(await listing(prepared.context)).toEqual([
      [long, 'long'],
      [deep, 'deep'],
      ['Dockerfile', labelled('FROM sandboxd/base:bookworm\n', prepared.buildId)],
    ]);
  });

  it('keeps a given context\'s entries, long paths included, and adds the files and the Dockerfile after them', async () => {
    const long = `${'c'.repeat(150)}/inside.txt`;
    const given = await tarArchive([
      { type: 'file', path: 'Dockerfile', mode: 0o644, content: Buffer.from('FROM sandboxd/base:bookworm\n') },
      { type: 'file', path: long, mode: 0o600, content: Buffer.from('given') },
    ]);
    const kept = await images.prepare({ name: 'ctx', context: given.toString('base64') });
    // The given entries stay as they were; the Dockerfile built, labelled, goes beside them.
    expect(kept.dockerfile).toBe('.sandboxd.Dockerfile');
    expect(await listing(kept.context)).toEqual([
      ['Dockerfile', 'FROM sandboxd/base:bookworm\n'],
      [long, 'given'],
      ['.sandboxd.Dockerfile', labelled('FROM sandboxd/base:bookworm\n', kept.buildId)],
    ]);
    const added = await images.prepare({ name: 'ctx', context: given.toString('base64'), dockerfile: 'FROM sandboxd/base:bookworm\nCOPY x /x\n', files: { x: b64('x') } });
    expect(added.dockerfile).toBe('.sandboxd.Dockerfile');
    expect((await readTar(added.context)).map(({ header }) => [header.name, header.mode])).toEqual([
      ['Dockerfile', 0o644],
      [long, 0o600],
      ['x', 0o644],
      ['.sandboxd.Dockerfile', 0o644],
    ]);
  });

  it('refuses a context that is not a tar, naming the field', async () => {
    await expect(images.prepare({ name: 'ctx', context: b64('A'.repeat(600)) })).rejects.toMatchObject({ code: 'BAD_REQUEST', message: /^context: not a tar archive/ });
  });
});
