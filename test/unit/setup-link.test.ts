import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/** scripts/setup-link.sh, the part of setup that puts `sandboxd` on the PATH, on a scratch bin directory. */
const SCRIPT = join(PACKAGE_ROOT, 'scripts', 'setup-link.sh');
const HELPERS = 'say() { echo "say: $*"; }; act() { echo "act: $*"; }';

describe('link_cli', () => {
  const root = mkdtempSync(join(tmpdir(), 'sandboxd-setup-link-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const checkout = (name: string) => {
    const dir = join(root, name);
    mkdirSync(join(dir, 'dist', 'src', 'cli'), { recursive: true });
    writeFileSync(join(dir, 'dist', 'src', 'cli', 'main.js'), '#!/usr/bin/env node\n');
    return dir;
  };
  const linkCli = (link: string, dir: string) =>
    spawnSync('bash', ['-c', `set -euo pipefail; ${HELPERS}; . ${SCRIPT}; link_cli '${link}' '${dir}'`], { encoding: 'utf8' });

  it('links where nothing is, makes the CLI executable, and changes nothing the second time', () => {
    const mine = checkout('mine');
    const link = join(root, 'bin-a', 'sandboxd');
    mkdirSync(join(root, 'bin-a'));
    const cli = join(mine, 'dist', 'src', 'cli', 'main.js');
    expect(linkCli(link, mine)).toMatchObject({ status: 0, stdout: `act: linked ${link} -> ${cli}: \`sandboxd\` works in a new shell\n` });
    expect(readlinkSync(link)).toBe(cli);
    expect(statSync(cli).mode & 0o111).toBe(0o111);
    expect(linkCli(link, mine)).toMatchObject({ status: 0, stdout: `say: ${link} -> ${cli}\n` });
  });

  it("relinks a link into this checkout, and leaves another checkout's link or a file alone", () => {
    const mine = checkout('mine2');
    const other = checkout('other');
    mkdirSync(join(root, 'bin-b'));
    const link = join(root, 'bin-b', 'sandboxd');
    symlinkSync(join(mine, 'old', 'main.js'), link);
    expect(linkCli(link, mine).stdout).toMatch(/^act: relinked /);
    expect(readlinkSync(link)).toBe(join(mine, 'dist', 'src', 'cli', 'main.js'));

    expect(linkCli(link, other).stdout).toMatch(/^say: .* is not this checkout's \(.*mine2.*\): left alone/);
    expect(readlinkSync(link)).toBe(join(mine, 'dist', 'src', 'cli', 'main.js'));

    const file = join(root, 'bin-b', 'file-sandboxd');
    writeFileSync(file, 'someone else\n');
    expect(linkCli(file, mine).stdout).toMatch(/is not this checkout's \(a file\): left alone/);
  });

  it('says the command to run where the directory is not writable, and does nothing without a build', () => {
    const mine = checkout('mine3');
    expect(linkCli('/proc/sandboxd-nowhere/sandboxd', mine).stdout).toMatch(/^act: cannot write \/proc\/sandboxd-nowhere: put sandboxd on the PATH with: sudo ln -s /);
    const empty = join(root, 'unbuilt');
    mkdirSync(empty);
    expect(linkCli(join(root, 'bin-a', 'other'), empty)).toMatchObject({ status: 0, stdout: '' });
  });
});
