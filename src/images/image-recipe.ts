import { createHash } from 'node:crypto';
import { catalogEntryFor, type CatalogEntry } from './catalog.js';

/**
 * Bump when the build changes in a way the recipe below does not capture (for example how
 * the tarball is produced); every image built before then becomes stale.
 */
export const BUILDER_VERSION = 1;

/** The account sandboxes run as; the Docker backend and the agent rely on uid/gid 1000. */
export const SANDBOX_USER = { name: 'sandbox', uid: 1000, gid: 1000, home: '/home/sandbox', shell: '/bin/bash' } as const;

/** The default working directory of every image, owned by the sandbox user. */
export const WORKSPACE_DIR = '/workspace';

/** Image labels the builder sets; the version label tells setup whether an image is stale. */
export const LABEL_IMAGE = 'sandboxd.image';
export const LABEL_VERSION = 'sandboxd.image.version';

/**
 * Documentation, man pages and translations weigh tens of megabytes and no sandbox reads
 * them; dpkg drops them at unpack time (copyright files stay, as in Debian's slim images).
 * mmdebstrap also writes these to /etc/dpkg/dpkg.cfg.d, so packages a sandbox installs later
 * stay slim too.
 */
const DPKG_OPTIONS = [
  'path-exclude=/usr/share/man/*',
  'path-exclude=/usr/share/info/*',
  'path-exclude=/usr/share/locale/*',
  'path-include=/usr/share/locale/locale.alias',
  'path-exclude=/usr/share/doc/*',
  'path-include=/usr/share/doc/*/copyright',
];

/**
 * Runs on the host after packages are installed, with the tree's root as `$1`. The account is
 * written into the databases directly because `useradd` (package `passwd`) is not part of
 * minbase and a sandbox has no use for it otherwise. Apt's package lists and caches need no
 * step here: mmdebstrap's cleanup stage removes them after the hooks.
 */
const { name: user, uid, gid, home, shell } = SANDBOX_USER;
export const CUSTOMIZE_HOOK = `#!/bin/sh
set -eu
root="$1"
echo '${user}:x:${uid}:${gid}:${user}:${home}:${shell}' >> "$root/etc/passwd"
echo '${user}:x:${gid}:' >> "$root/etc/group"
echo '${user}:*:19000:0:99999:7:::' >> "$root/etc/shadow"
echo '${user}:*::' >> "$root/etc/gshadow"
mkdir -p "$root${home}" "$root${WORKSPACE_DIR}"
cp -a "$root/etc/skel/." "$root${home}/"
chown -R ${uid}:${gid} "$root${home}" "$root${WORKSPACE_DIR}"
chmod 0755 "$root${home}" "$root${WORKSPACE_DIR}"
`;

/** Where a layer's script and files lie in its build container; removed before the commit. */
export const LAYER_DIR = '/tmp/sandboxd-layer';

/**
 * The script that makes a layer image (one with `from`), run as root in a container of its
 * `from` image, which is then committed. Packages come from the `from` image's own apt sources
 * (the mirrors it was bootstrapped from) without recommendations, as mmdebstrap installs them,
 * and with the dpkg filters it carries; apt's lists and caches are removed again. Node.js: the
 * tarballs the builder fetched with `npm pack` (`node.tgz`, `npm.tgz`) lie beside the script.
 * The distribution goes into /usr/local (bin/node, headers for native modules), npm into
 * /usr/local/lib/node_modules, with npm and npx linked onto the PATH as Node's own installer
 * does.
 */
export function layerScript(entry: CatalogEntry): string {
  const lines = ['set -eu', 'export DEBIAN_FRONTEND=noninteractive'];
  if (entry.packages.length) {
    lines.push(
      'apt-get -q update',
      `apt-get -q -o Dpkg::Options::=--force-unsafe-io -o Dpkg::Use-Pty=0 install -y --no-install-recommends ${entry.packages.join(' ')}`,
      'apt-get clean',
      'rm -rf /var/lib/apt/lists/*',
    );
  }
  if (entry.node) {
    lines.push(
      `tar -xzf ${LAYER_DIR}/node.tgz -C /usr/local --strip-components=1 --no-same-owner package/bin package/include`,
      'mkdir -p /usr/local/lib/node_modules/npm',
      `tar -xzf ${LAYER_DIR}/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1 --no-same-owner`,
      'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm',
      'ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
    );
  }
  lines.push(`rm -rf ${LAYER_DIR}`);
  return `${lines.join('\n')}\n`;
}

/** Dockerfile instructions applied by `docker import` (labels are added per build). */
export const IMPORT_CHANGES: readonly string[] = [
  `USER ${SANDBOX_USER.name}`,
  `WORKDIR ${WORKSPACE_DIR}`,
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
  `ENV HOME=${SANDBOX_USER.home}`,
  // Python and many CLIs misbehave on non-ASCII under the POSIX locale; C.UTF-8 ships with libc.
  'ENV LANG=C.UTF-8',
  'CMD ["/bin/bash"]',
];

/** `repo:tag` split at the last colon after the last slash (a registry port is not a tag). */
export function splitTag(tag: string): { repo: string; tag: string } {
  const colon = tag.lastIndexOf(':');
  if (colon > tag.lastIndexOf('/')) return { repo: tag.slice(0, colon), tag: tag.slice(colon + 1) };
  return { repo: tag, tag: 'latest' };
}

/** The catalog entry a layer image (one with `from`) is made on. */
export function parentOf(entry: CatalogEntry): CatalogEntry {
  const parent = entry.from === undefined ? undefined : catalogEntryFor(entry.from);
  if (!parent) throw new Error(`catalog image ${entry.name} is not a layer on a catalog image (from: ${entry.from ?? 'none'})`);
  return parent;
}

/**
 * A content hash of everything that shapes the image: packages, dpkg filters, the hook or the
 * layer's script, the `from` image's own version, the import changes, the image's environment
 * and the builder version. Equal hashes mean an up-to-date image.
 */
export function imageVersion(entry: CatalogEntry): string {
  const made = entry.from
    ? { from: imageVersion(parentOf(entry)), script: layerScript(entry) }
    : { suite: entry.suite, variant: 'minbase', dpkg: DPKG_OPTIONS, hook: CUSTOMIZE_HOOK };
  const recipe = {
    builder: BUILDER_VERSION,
    ...made,
    packages: [...entry.packages].sort(),
    changes: IMPORT_CHANGES,
    env: entry.env,
    ...(entry.node ? { node: entry.node } : {}),
  };
  return createHash('sha256').update(JSON.stringify(recipe)).digest('hex').slice(0, 16);
}

/** The `docker import` changes for one build, labels included. */
export function importChanges(entry: CatalogEntry): string[] {
  return [
    ...IMPORT_CHANGES,
    ...Object.entries(entry.env).map(([key, value]) => `ENV ${key}=${value}`),
    `LABEL ${LABEL_IMAGE}=${entry.name} ${LABEL_VERSION}=${imageVersion(entry)}`,
  ];
}

/**
 * dpkg without an fsync per unpacked file while the tree is built (as Debian's container images
 * set it): with three images building at once on a 2-core VM, an image's essential packages were
 * installed in 42 s instead of 78 s.
 * The file is removed before the tree is packed, so the image is the same as without it.
 */
const UNSAFE_IO = '/etc/dpkg/dpkg.cfg.d/00sandboxd-build-unsafe-io';
const UNSAFE_IO_HOOKS = [
  `--setup-hook=mkdir -p "$1/etc/dpkg/dpkg.cfg.d" && echo force-unsafe-io > "$1${UNSAFE_IO}"`,
  `--customize-hook=rm -f "$1${UNSAFE_IO}"`,
] as const;

/**
 * mmdebstrap's argument list. `hookPath` is an executable holding {@link CUSTOMIZE_HOOK}
 * (mmdebstrap runs a file directly; inline it would echo the whole script into the log).
 * `mirrors` are one-line apt sources; when empty, mmdebstrap uses deb.debian.org and adds
 * the updates and security suites itself.
 */
export function mmdebstrapArgs(
  entry: CatalogEntry,
  target: string,
  hookPath: string,
  mirrors: readonly string[] = [],
): string[] {
  return [
    '--variant=minbase',
    `--include=${entry.packages.join(',')}`,
    ...DPKG_OPTIONS.map((option) => `--dpkgopt=${option}`),
    ...UNSAFE_IO_HOOKS,
    `--customize-hook=${hookPath}`,
    entry.suite,
    target,
    ...mirrors,
  ];
}
