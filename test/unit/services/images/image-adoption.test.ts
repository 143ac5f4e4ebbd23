import Sqlite from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, BuiltImage, ImageBuildCapability } from '../../../../src/backends/backend.js';
import { resolveBuiltImage } from '../../../../src/images/deployment-names.js';
import { ImageService } from '../../../../src/services/images/image-service.js';
import { MIGRATIONS } from '../../../../src/state/migrations/index.js';
import { openStore, type Store } from '../../../../src/state/store.js';
import { silentLogger } from '../../../../src/telemetry/logger.js';

/** An engine's tags (tag -> image id and labels): enough for listing, tagging and resolving. */
class Tags implements ImageBuildCapability {
  readonly images = new Map<string, { id: string; labels: Record<string, string> }>();
  build = async (): Promise<never> => {
    throw new Error('not built in this test');
  };
  inspect = async (reference: string): Promise<BuiltImage | undefined> => {
    const image = this.images.get(reference);
    return image && { tag: reference, id: image.id, sizeBytes: 1, createdAt: '2026-01-01T00:00:00.000Z' };
  };
  listLabelled = async (label: string) =>
    [...this.images].filter(([, image]) => label in image.labels).map(([tag, image]) => ({ tag, id: image.id, sizeBytes: 1, createdAt: '2026-01-01T00:00:00.000Z', labels: image.labels }));
  remove = async (tag: string) => void this.images.delete(tag);
  sweep = async () => ({ containers: 0, images: 0 });
  tag = async (source: string, tag: string) => {
    const image = [...this.images.values()].find((i) => i.id === source);
    if (!image) throw new Error(`no image ${source}`);
    this.images.set(tag, image);
  };
}

let store: Store | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await store?.close();
  store = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A data directory as the server before deployment ids left it, opened now. */
async function legacyStore(): Promise<Store> {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-adopt-'));
  dirs.push(dir);
  const before = Object.fromEntries(Object.entries(MIGRATIONS).filter(([name]) => name < '0022'));
  await (await openStore(dir, before)).close();
  const db = new Sqlite(join(dir, 'sandboxd.db'));
  db.prepare('DELETE FROM meta').run();
  db.prepare("INSERT INTO meta (key, value) VALUES ('instance_id', 'a1b2c3d4-e5f')").run();
  db.close();
  return openStore(dir);
}

const serviceOf = (tags: Tags, opened: Store) =>
  new ImageService({ backend: { capabilities: { imageBuild: tags } } as unknown as Backend, store: opened, logger: silentLogger() } as unknown as ConstructorParameters<typeof ImageService>[0]);

describe('built images from before deployment ids', () => {
  it('are adopted at the first start of their data directory: a tag under the deployment beside the old one, once', async () => {
    store = await legacyStore();
    const tags = new Tags();
    tags.images.set('sandboxd-user/old:latest', { id: 'sha256:old', labels: { 'sandboxd.user_image': 'old' } });
    tags.images.set('sandboxd-user/ffffffffffff/theirs:latest', { id: 'sha256:theirs', labels: { 'sandboxd.user_image': 'theirs', 'sandboxd.instance': 'ffffffffffff' } });
    const images = serviceOf(tags, store);
    expect((await images.list()).filter((i) => i.kind === 'built')).toEqual([]);

    await images.adoptLegacy();
    expect(tags.images.get('sandboxd-user/a1b2c3d4-e5f/old:latest')?.id).toBe('sha256:old');
    expect(tags.images.has('sandboxd-user/old:latest')).toBe(true);
    expect((await images.list()).filter((i) => i.kind === 'built').map((i) => [i.name, i.tag])).toEqual([['old', 'sandboxd-user/a1b2c3d4-e5f/old:latest']]);

    // Once: a legacy image another server builds later is not this deployment's.
    tags.images.set('sandboxd-user/later:latest', { id: 'sha256:later', labels: { 'sandboxd.user_image': 'later' } });
    await images.adoptLegacy();
    expect(tags.images.has('sandboxd-user/a1b2c3d4-e5f/later:latest')).toBe(false);
  });

  it('a new data directory adopts none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandboxd-adopt-'));
    dirs.push(dir);
    store = await openStore(dir);
    const tags = new Tags();
    tags.images.set('sandboxd-user/old:latest', { id: 'sha256:old', labels: { 'sandboxd.user_image': 'old' } });
    await serviceOf(tags, store).adoptLegacy();
    expect([...tags.images.keys()]).toEqual(['sandboxd-user/old:latest']);
  });
});

describe('image: NAME', () => {
  it("is the deployment's built image NAME when it has one, else the engine's reference", async () => {
    const tags = new Tags();
    tags.images.set('sandboxd-user/dep1/tool:latest', { id: 'sha256:tool', labels: {} });
    expect(await resolveBuiltImage('tool', 'dep1', tags.inspect)).toBe('sandboxd-user/dep1/tool:latest');
    expect(await resolveBuiltImage('tool', 'dep2', tags.inspect)).toBe('tool');
    expect(await resolveBuiltImage('alpine', 'dep1', tags.inspect)).toBe('alpine');
    expect(await resolveBuiltImage('sandboxd/base:bookworm', 'dep1', tags.inspect)).toBe('sandboxd/base:bookworm');
    expect(await resolveBuiltImage('tool', 'dep1', undefined)).toBe('tool');
    // Its only tag is latest; another is a 400 that says so, not a pull from a registry.
    expect(await resolveBuiltImage('tool:latest', 'dep1', tags.inspect)).toBe('sandboxd-user/dep1/tool:latest');
    await expect(resolveBuiltImage('tool:v2', 'dep1', tags.inspect)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: "image 'tool:v2': 'tool' is an image built here, which has no tag 'v2': name it 'tool' (sandboxd images list shows them)",
    });
    expect(await resolveBuiltImage('alpine:3', 'dep1', tags.inspect)).toBe('alpine:3');
  });
});
