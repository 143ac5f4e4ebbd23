import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * scripts/setup-storage.sh, the part of setup that puts Docker's storage on btrfs: its decision
 * for each state a machine can be in, and its steps on a scratch image and mount point. Nothing
 * here touches the running dockerd: `docker` and the stop are stubbed where a step would.
 */
const SCRIPT = join(PACKAGE_ROOT, 'scripts', 'setup-storage.sh');
/** setup.sh's helpers, as the sourced script expects them; `act` marks a change. */
const HELPERS = 'say() { echo "say: $*"; }; act() { echo "act: $*"; }; die() { echo "die: $*"; exit 1; }; has_systemd() { false; }';

function bash(script: string, env: Record<string, string> = {}): { stdout: string; status: number | null } {
  const result = spawnSync('bash', ['-c', `set -euo pipefail; ${HELPERS}; . ${SCRIPT}; ${script}`], { encoding: 'utf8', env: { ...process.env, ...env } });
  return { stdout: result.stdout + result.stderr, status: result.status };
}

const ROOT = '/var/lib/sandboxd-docker';

describe('storage_decision', () => {
  const decide = (...args: string[]) => bash(`storage_decision ${args.map((a) => `'${a}'`).join(' ')}`).stdout.trim();

  it('configures a machine whose dockerd has not started yet (no restart needed)', () => {
    expect(decide('0', '', '', '0', '0', '')).toBe('configure');
    expect(decide('0', '', '', '1', '0', '')).toBe('configure');
  });

  it('changes nothing where dockerd already keeps its data on the mounted btrfs root', () => {
    expect(decide('1', 'btrfs', ROOT, '1', '1', '')).toBe('ok');
    expect(decide('1', 'btrfs', ROOT, '1', '0', '1')).toBe('ok');
  });

  it('moves a running dockerd only when it holds nothing but sandboxd work, or the admin opted in', () => {
    expect(decide('1', 'overlay2', '/var/lib/docker', '0', '0', '')).toBe('switch');
    expect(decide('1', 'overlay2', '/var/lib/docker', '0', '1', '')).toBe('leave');
    expect(decide('1', 'overlay2', '/var/lib/docker', '0', '1', '1')).toBe('switch');
    // dockerd on the root's directory while the image is not mounted (it started before the mount).
    expect(decide('1', 'btrfs', ROOT, '0', '0', '')).toBe('switch');
    expect(decide('1', 'overlay2', ROOT, '0', '1', '')).toBe('leave');
  });

  it('leaves storage alone with SANDBOXD_SETUP_DISK_QUOTA=0', () => {
    expect(decide('0', '', '', '0', '0', '0')).toBe('skip');
    expect(decide('1', 'overlay2', '/var/lib/docker', '0', '0', '0')).toBe('skip');
  });
});

describe('setup_storage with a stubbed docker', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-storage-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** A running dockerd on overlay2 holding the given containers (labels) and images. */
  const engine = (labels: string, images: string) => `
    docker() {
      case "$1 \${2:-} \${3:-}" in
        "info  ") return 0 ;;
        "info --format {{.Driver}}") echo overlay2 ;;
        "info --format {{.DockerRootDir}}") echo /var/lib/docker ;;
        "ps -a --format") printf '${labels}' ;;
        "images --format {{.Repository}}") printf '${images}' ;;
      esac
    }
    stop_dockerd() { echo "stopped dockerd"; }
    ensure_storage_root() { echo "root ready"; }`;

  it('leaves a dockerd that holds other work, saying how to opt in, and changes no file', () => {
    const daemonJson = join(dir, 'leave.json');
    writeFileSync(daemonJson, '{"runtimes":{}}\n');
    const out = bash(`${engine('true\\n\\n', 'sandboxd/base\\n')}; setup_storage ${daemonJson}`);
    expect(out.stdout).toContain('SANDBOXD_SETUP_DISK_QUOTA=1 bash scripts/setup.sh');
    expect(out.stdout).not.toMatch(/stopped dockerd|root ready/);
    expect(readFileSync(daemonJson, 'utf8')).toBe('{"runtimes":{}}\n');
  });

  it("moves a dockerd that holds only sandboxd's containers and images: stops it, then sets the data-root", () => {
    const daemonJson = join(dir, 'switch.json');
    writeFileSync(daemonJson, '{"runtimes":{"runsc":{"path":"/usr/bin/runsc"}}}\n');
    const out = bash(`${engine('true\\ntrue\\n', 'sandboxd/base\\nsandboxd-snapshot\\n<none>\\n')}; setup_storage ${daemonJson}; echo "restarted=$STORAGE_RESTARTED"`, {
      SANDBOXD_STORAGE_ROOT: '/scratch/root',
    });
    expect(out.stdout.indexOf('stopped dockerd')).toBeLessThan(out.stdout.indexOf('root ready'));
    expect(out.stdout).toContain('restarted=1');
    expect(JSON.parse(readFileSync(daemonJson, 'utf8'))).toEqual({
      runtimes: { runsc: { path: '/usr/bin/runsc' } },
      'data-root': '/scratch/root',
      'storage-driver': 'btrfs',
    });
  });

  it('merges data-root and storage-driver once: a second run changes nothing', () => {
    const daemonJson = join(dir, 'merge.json');
    const env = { SANDBOXD_STORAGE_ROOT: '/scratch/root' };
    expect(bash(`merge_storage_config ${daemonJson}`, env).stdout.trim()).toBe('changed');
    expect(bash(`merge_storage_config ${daemonJson}`, env).stdout.trim()).toBe('');
  });
});

/** Root, btrfs-progs and loop devices: what making a scratch file system takes. */
const canMount = process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v mkfs.btrfs && command -v losetup']).status === 0;

describe.skipIf(!canMount)('ensure_storage_root on a scratch image (root only)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-storage-root-'));
  const env = { SANDBOXD_STORAGE_IMAGE: join(dir, 'storage.img'), SANDBOXD_STORAGE_ROOT: join(dir, 'root'), SANDBOXD_STORAGE_GB: '1', SANDBOXD_STORAGE_MIN_GB: '1' };
  const umount = () => spawnSync('umount', [env.SANDBOXD_STORAGE_ROOT]);
  afterAll(() => {
    umount();
    rmSync(dir, { recursive: true, force: true });
  });

  it('makes a sparse image, mounts it with quotas on; again changes nothing; after an unmount (a reboot) mounts it again', () => {
    const first = bash('ensure_storage_root', env);
    expect(first.status, first.stdout).toBe(0);
    expect(first.stdout).toMatch(/act: making a 1 GiB sparse btrfs image/);
    expect(first.stdout).toMatch(/act: enabling btrfs simple quotas/);
    expect(bash('storage_quota_mode', env).stdout.trim()).toBe('squota');
    expect(statSync(env.SANDBOXD_STORAGE_IMAGE).size).toBe(1024 ** 3);
    expect(execFileSync('findmnt', ['-n', '-o', 'FSTYPE', env.SANDBOXD_STORAGE_ROOT], { encoding: 'utf8' }).trim()).toBe('btrfs');
    expect(bash('ensure_storage_root', env).stdout).not.toContain('act:');
    umount();
    const again = bash('ensure_storage_root', env);
    expect(again.stdout).toContain('act: mounting');
    expect(again.stdout).not.toMatch(/making|enabling/);
    expect(bash('storage_mounted', env).stdout.trim()).toBe('1');
  });

  it('switches a file system with full qgroup accounting to simple quotas', () => {
    execFileSync('btrfs', ['quota', 'disable', env.SANDBOXD_STORAGE_ROOT]);
    execFileSync('btrfs', ['quota', 'enable', env.SANDBOXD_STORAGE_ROOT]);
    expect(bash('storage_quota_mode', env).stdout.trim()).toBe('qgroup');
    const out = bash('ensure_storage_root', env);
    expect(out.stdout).toContain('act: switching btrfs quotas');
    expect(bash('storage_quota_mode', env).stdout.trim()).toBe('squota');
  });

  it('makes no image where the disk has less free space than a data-root needs', () => {
    const out = bash('ensure_storage_root || echo refused', { ...env, SANDBOXD_STORAGE_IMAGE: join(dir, 'none.img'), SANDBOXD_STORAGE_MIN_GB: '100000' });
    expect(out.stdout).toContain('refused');
    expect(out.stdout).toContain('disk_mb is unsupported');
  });
});
