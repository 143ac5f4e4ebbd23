import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstat, mkdtemp, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import Dockerode from 'dockerode';
import { tarArchive, type TarEntry } from './tar-archive.js';

const run = promisify(execFile);

/**
 * Non-Debian test images, made from Debian packages without a registry, so that the agent
 * is tested where it claims to work:
 * - busybox: a static busybox and its applet links, nothing else: no libc, no bash, no
 *   /etc/passwd at all, no /workspace, no default user or working directory (root in /).
 * - musl: Alpine's shape: musl libc, a static busybox, /etc/passwd and /etc/group with a
 *   non-root default user (Config.User, as images that set USER), and /workspace as WORKDIR.
 * No host package is installed: dpkg-deb and apt-get are on every Debian host.
 */
export const BUSYBOX_IMAGE = 'sandboxd-test/busybox:latest';
export const MUSL_IMAGE = 'sandboxd-test/musl:latest';
/** BUSYBOX_IMAGE with a default user (USER ghost) that no /etc/passwd lists. */
export const GHOST_USER_IMAGE = 'sandboxd-test/busybox-ghost:latest';

/** The musl image's default user: not `sandbox`, not uid 1000, so nothing may assume either. */
export const MUSL_USER = { name: 'app', uid: 1001, gid: 1001, home: '/home/app' } as const;

/** Label holding the recipe hash: an image whose label differs is rebuilt. */
const LABEL_VERSION = 'sandboxd-test.image.version';
/** Bump when the build changes in a way the recipes below do not capture. */
const BUILDER_VERSION = 1;
const APT_CACHE = '/var/cache/apt/archives';
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

interface Recipe {
  tag: string;
  /** Debian packages unpacked into the tree (only their files; no maintainer scripts run). */
  packages: readonly string[];
  /** Entries added after the packages' files and busybox's applet links. */
  extra: readonly TarEntry[];
  /** `docker import --change` instructions. */
  changes: readonly string[];
}

const text = (path: string, content: string, mode = 0o644): TarEntry => ({ type: 'file', path, mode, content: Buffer.from(content) });

const BUSYBOX: Recipe = {
  tag: BUSYBOX_IMAGE,
  packages: ['busybox-static'],
  extra: [{ type: 'dir', path: 'tmp', mode: 0o1777 }],
  changes: ['CMD ["sh"]'],
};

const RECIPES: readonly Recipe[] = [
  BUSYBOX,
  { ...BUSYBOX, tag: GHOST_USER_IMAGE, changes: ['USER ghost', ...BUSYBOX.changes] },
  {
    tag: MUSL_IMAGE,
    packages: ['busybox-static', 'musl'],
    extra: [
      { type: 'dir', path: 'tmp', mode: 0o1777 },
      { type: 'dir', path: 'etc', mode: 0o755 },
      text('etc/passwd', `root:x:0:0:root:/root:/bin/sh\n${MUSL_USER.name}:x:${MUSL_USER.uid}:${MUSL_USER.gid}:${MUSL_USER.name}:${MUSL_USER.home}:/bin/sh\n`),
      text('etc/group', `root:x:0:root\nwheel:x:10:root,${MUSL_USER.name}\n${MUSL_USER.name}:x:${MUSL_USER.gid}:\n`),
      { type: 'dir', path: 'root', mode: 0o700 },
      { type: 'dir', path: 'home', mode: 0o755 },
      { type: 'dir', path: MUSL_USER.home.slice(1), mode: 0o755, uid: MUSL_USER.uid, gid: MUSL_USER.gid },
      { type: 'dir', path: 'workspace', mode: 0o755, uid: MUSL_USER.uid, gid: MUSL_USER.gid },
    ],
    changes: [`USER ${MUSL_USER.name}`, 'WORKDIR /workspace', `ENV ${PATH_ENV}`, `ENV HOME=${MUSL_USER.home}`, 'CMD ["/bin/sh"]'],
  },
];

const versionOf = (recipe: Recipe): string =>
  createHash('sha256').update(JSON.stringify({ builder: BUILDER_VERSION, ...recipe })).digest('hex').slice(0, 16);

/**
 * Builds the minimal image `tag` (one of the constants above) unless it is present with the
 * current recipe. The packages come from apt's cache or `apt-get download` (the Debian mirror
 * must be reachable then), are unpacked with `dpkg-deb -x`, and the tree goes to `docker
 * import` as a tar stream. A replaced image of ours is removed.
 */
export async function ensureMinimalImage(tag: string, docker = new Dockerode()): Promise<void> {
  const recipe = RECIPES.find((r) => r.tag === tag);
  if (!recipe) throw new Error(`no recipe for ${tag}; known: ${RECIPES.map((r) => r.tag).join(', ')}`);
  const version = versionOf(recipe);
  const previous = await docker.getImage(tag).inspect().catch(() => undefined);
  if (previous?.Config?.Labels?.[LABEL_VERSION] === version) return;

  const scratch = await mkdtemp(join(tmpdir(), 'sandboxd-test-image-'));
  try {
    const root = join(scratch, 'root');
    for (const name of recipe.packages) {
      await run('dpkg-deb', ['-x', await debianPackage(name, scratch), root]);
    }
    const entries = [...(await treeEntries(root)), ...(await appletLinks(root)), ...recipe.extra];
    await importTar(docker, await tarArchive(dedupe(entries)), tag, [...recipe.changes, `LABEL ${LABEL_VERSION}=${version}`]);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  if (previous) await docker.getImage(previous.Id).remove().catch(() => undefined);
}

/** The .deb of a package: from apt's cache when it holds one, else downloaded into `dir`. */
async function debianPackage(name: string, dir: string): Promise<string> {
  const { stdout: arch } = await run('dpkg', ['--print-architecture']);
  const wanted = (file: string) => file.startsWith(`${name}_`) && file.endsWith(`_${arch.trim()}.deb`);
  const cached = (await readdir(APT_CACHE).catch(() => [] as string[])).filter(wanted).sort();
  if (cached.length > 0) return join(APT_CACHE, cached[cached.length - 1]!);
  try {
    await run('apt-get', ['download', '-qq', name], { cwd: dir });
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
    throw new Error(`apt-get download ${name} failed (${detail}); run \`apt-get update\` and check that the Debian mirror is reachable`);
  }
  const downloaded = (await readdir(dir)).find(wanted);
  if (!downloaded) throw new Error(`apt-get download ${name} left no ${name}_*_${arch.trim()}.deb`);
  return join(dir, downloaded);
}

/** Every directory, file and symlink under `root`, parents first; documentation is left out. */
async function treeEntries(root: string, relative = ''): Promise<TarEntry[]> {
  const entries: TarEntry[] = [];
  for (const name of (await readdir(join(root, relative))).sort()) {
    const path = relative ? `${relative}/${name}` : name;
    if (path === 'usr/share') continue;
    const full = join(root, path);
    const info = await lstat(full);
    if (info.isSymbolicLink()) entries.push({ type: 'symlink', path, target: await readlink(full) });
    else if (info.isDirectory()) entries.push({ type: 'dir', path, mode: info.mode & 0o7777 }, ...(await treeEntries(root, path)));
    else entries.push({ type: 'file', path, mode: info.mode & 0o7777, content: await readFile(full) });
  }
  return entries;
}

/** busybox's applets as symlinks to /bin/busybox at the paths busybox itself lists. */
async function appletLinks(root: string): Promise<TarEntry[]> {
  const { stdout } = await run(join(root, 'bin/busybox'), ['--list-full']);
  // It lists itself (bin/busybox) and, outside any directory, linuxrc: neither is an applet link.
  const paths = stdout.split('\n').filter((line) => line.includes('/') && line !== 'bin/busybox');
  const dirs = [...new Set(paths.map((path) => path.slice(0, path.lastIndexOf('/'))))];
  const parents = dirs.flatMap((dir) => dir.split('/').map((_, i, parts) => parts.slice(0, i + 1).join('/')));
  return [
    ...[...new Set(parents)].map((path): TarEntry => ({ type: 'dir', path, mode: 0o755 })),
    ...paths.map((path): TarEntry => ({ type: 'symlink', path, target: '/bin/busybox' })),
  ];
}

/** Keeps the last entry of each path, at the position of its first. */
function dedupe(entries: TarEntry[]): TarEntry[] {
  const byPath = new Map<string, TarEntry>();
  for (const entry of entries) byPath.set(entry.path, entry);
  return [...byPath.values()];
}

async function importTar(docker: Dockerode, tar: Buffer, tag: string, changes: string[]): Promise<void> {
  const colon = tag.lastIndexOf(':');
  const stream = await docker.importImage(Readable.from([tar]), { repo: tag.slice(0, colon), tag: tag.slice(colon + 1), changes });
  await new Promise<void>((resolve, reject) => {
    let failure: string | undefined;
    docker.modem.followProgress(
      stream,
      (err) => (err || failure ? reject(new Error(`docker import of ${tag} failed: ${failure ?? err?.message}`)) : resolve()),
      (event: { error?: string }) => void (event.error && (failure = event.error)),
    );
  });
}
