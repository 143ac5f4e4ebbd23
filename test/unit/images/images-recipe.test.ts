import { describe, expect, it } from 'vitest';
import { buildHint, CATALOG, catalogEntryFor, DEFAULT_IMAGE } from '../../../src/images/catalog.js';
import { importChanges, imageVersion, LABEL_VERSION, layerScript, mmdebstrapArgs, splitTag } from '../../../src/images/image-recipe.js';

describe('image catalog', () => {
  it('maps names and tags to the same entry', () => {
    expect(catalogEntryFor('base')?.tag).toBe('sandboxd/base:bookworm');
    expect(catalogEntryFor('sandboxd/python:bookworm')?.name).toBe('python');
    expect(catalogEntryFor('base')?.packages).toEqual(expect.arrayContaining(['git', 'python3']));
    expect(catalogEntryFor('node')?.from).toBe('base');
    expect(catalogEntryFor('node')?.packages).toEqual([]);
    expect(catalogEntryFor('node')?.node?.version).toMatch(/^24\./);
    expect(catalogEntryFor('ubuntu:24.04')).toBeUndefined();
    expect(catalogEntryFor(DEFAULT_IMAGE)?.name).toBe('base');
  });

  it('tells how to get an image', () => {
    expect(buildHint('sandboxd/base:bookworm')).toBe('build it with `sandboxd images build base`');
    expect(buildHint('python')).toBe('build it with `sandboxd images build python`');
    expect(buildHint('alpine:3')).toMatch(/docker pull alpine:3.*docker load.*sandboxd images list/);
  });

  it('gives every image its own version, stable across calls', () => {
    const versions = CATALOG.map(imageVersion);
    expect(new Set(versions).size).toBe(CATALOG.length);
    expect(imageVersion(CATALOG[0]!)).toBe(imageVersion({ ...CATALOG[0]!, packages: [...CATALOG[0]!.packages].reverse() }));
    expect(imageVersion({ ...CATALOG[0]!, packages: [...CATALOG[0]!.packages, 'jq'] })).not.toBe(imageVersion(CATALOG[0]!));
  });

  it("makes every image but base a layer on it, whose version follows base's", () => {
    expect(CATALOG.filter((entry) => !entry.from).map((entry) => entry.name)).toEqual(['base']);
    for (const entry of CATALOG) if (entry.from) expect(CATALOG.findIndex((e) => e.name === entry.from)).toBeLessThan(CATALOG.indexOf(entry));
    // The same layer on another image is another image: the version follows its from image's.
    const python = catalogEntryFor('python')!;
    expect(imageVersion({ ...python, from: 'node' })).not.toBe(imageVersion(python));
  });
});

describe('image recipe', () => {
  const base = catalogEntryFor('base')!;

  it('bootstraps minbase with the package list, the hook and the given mirrors', () => {
    const args = mmdebstrapArgs(base, '/tmp/x/rootfs.tar', '/tmp/x/hook.sh', ['deb http://m/debian bookworm main']);
    expect(args).toContain('--variant=minbase');
    expect(args).toContain(`--include=${base.packages.join(',')}`);
    expect(args).toContain('--customize-hook=/tmp/x/hook.sh');
    // dpkg's unsafe I/O only while building: set before the packages, removed before packing.
    expect(args.filter((a) => a.includes('unsafe-io'))).toEqual([
      '--setup-hook=mkdir -p "$1/etc/dpkg/dpkg.cfg.d" && echo force-unsafe-io > "$1/etc/dpkg/dpkg.cfg.d/00sandboxd-build-unsafe-io"',
      '--customize-hook=rm -f "$1/etc/dpkg/dpkg.cfg.d/00sandboxd-build-unsafe-io"',
    ]);
    expect(args.slice(-3)).toEqual(['bookworm', '/tmp/x/rootfs.tar', 'deb http://m/debian bookworm main']);
  });

  it('sets user, workdir, environment and labels on import', () => {
    const changes = importChanges(base);
    expect(changes).toEqual(
      expect.arrayContaining(['USER sandbox', 'WORKDIR /workspace', 'ENV HOME=/home/sandbox', 'CMD ["/bin/bash"]']),
    );
    expect(changes).toContain(`LABEL sandboxd.image=base ${LABEL_VERSION}=${imageVersion(base)}`);
    expect(changes.filter((c) => c.startsWith('ENV PIP_'))).toEqual([]);
    expect(importChanges(catalogEntryFor('python')!)).toContain('ENV PIP_BREAK_SYSTEM_PACKAGES=1');
  });

  it("makes a layer with apt from the image's own sources, without recommendations, leaving no lists or build files", () => {
    const script = layerScript(catalogEntryFor('python')!);
    expect(script).toContain('apt-get -q update');
    expect(script).toMatch(/install -y --no-install-recommends python3-pip python3-venv\n/);
    expect(script).toContain('rm -rf /var/lib/apt/lists/*');
    expect(script.trimEnd().split('\n').pop()).toBe('rm -rf /tmp/sandboxd-layer');
    const node = layerScript(catalogEntryFor('node')!);
    expect(node).not.toContain('apt-get');
    expect(node).toContain('tar -xzf /tmp/sandboxd-layer/node.tgz -C /usr/local --strip-components=1');
    expect(node).toContain('ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm');
  });

  it('splits tags at the last colon after the last slash', () => {
    expect(splitTag('sandboxd/base:bookworm')).toEqual({ repo: 'sandboxd/base', tag: 'bookworm' });
    expect(splitTag('localhost:5000/x')).toEqual({ repo: 'localhost:5000/x', tag: 'latest' });
    expect(splitTag('localhost:5000/x:1')).toEqual({ repo: 'localhost:5000/x', tag: '1' });
  });
});
