import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';

/**
 * scripts/setup-plan.sh, what setup installs in each mode and the line it prints first, and
 * setup.sh's own `--print-packages` and `--dry-run`, which change nothing and need no root.
 */
const PLAN = join(PACKAGE_ROOT, 'scripts', 'setup-plan.sh');
const SETUP = join(PACKAGE_ROOT, 'scripts', 'setup.sh');
const TEST_ONLY = ['chromium', 'haproxy', 'prometheus', 'systemd', 'zsh'];
const SERVING = ['docker.io', 'iptables', 'runsc', 'mmdebstrap', 'git', 'golang-go'];

function plan(script: string): string {
  const result = spawnSync('bash', ['-c', `set -euo pipefail; . ${PLAN}; ${script}`], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout.trim();
}

function setup(...args: string[]): { stdout: string; status: number | null } {
  const result = spawnSync('bash', [SETUP, ...args], { encoding: 'utf8', env: { ...process.env, SANDBOXD_SETUP_SKIP_IMAGES: '1' } });
  return { stdout: result.stdout + result.stderr, status: result.status };
}

describe('the packages of each mode', () => {
  it('serving (npm start, --serve) installs no test-only package; plain setup (npm test) adds them', () => {
    const serve = setup('--serve', '--print-packages');
    const full = setup('--print-packages');
    expect(serve.status).toBe(0);
    expect(full.status).toBe(0);
    const serving = serve.stdout.trim().split(' ');
    const all = full.stdout.trim().split(' ');
    for (const name of TEST_ONLY) {
      expect(serving).not.toContain(name);
      expect(all).toContain(name);
    }
    for (const name of SERVING) {
      expect(serving).toContain(name);
      expect(all).toContain(name);
    }
    expect(all.filter((name) => !serving.includes(name)).sort()).toEqual(TEST_ONLY);
  });

  it('npm start runs setup in the serving mode, npm test in the full one', () => {
    const { scripts } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(scripts.start).toMatch(/scripts\/setup\.sh --serve\b/);
    expect(scripts.test).toMatch(/scripts\/setup\.sh --quiet &&/);
    expect(scripts.test).not.toContain('--serve');
  });
});

describe('setup_estimate', () => {
  it('on a fresh machine says what will be done and about how long', () => {
    const line = plan('setup_estimate "$(setup_packages serve)" 1 1 1 1 3');
    expect(line).toBe(
      'a fresh machine: installing Docker and gVisor (10 Debian packages); npm ci; building sandboxd, the dashboard, the agent and 3 images; about 2-3 minutes',
    );
  });

  it('counts the test-only packages where they are missing too', () => {
    const serve = plan('setup_estimate "$(setup_packages serve)" 1 1 1 1 3');
    const full = plan('setup_estimate "$(setup_packages full)" 1 1 1 1 3');
    expect(full).toContain('(15 Debian packages)');
    expect(full).not.toBe(serve);
  });

  it('names only what is missing on a machine that has most things, and prints nothing when nothing is', () => {
    expect(plan('setup_estimate "" 0 1 1 0 0')).toMatch(/^building sandboxd and the dashboard; about \d+ s$/);
    expect(plan('setup_estimate "zsh" 0 0 0 0 0')).toMatch(/^installing zsh; about \d+ s$/);
    expect(plan('setup_estimate "" 0 0 0 0 1')).toMatch(/^building 1 image; about \d+ s$/);
    expect(plan('setup_estimate "" 0 0 0 0 0')).toBe('');
  });

  it('gives short steps in seconds and long ones as a range of minutes', () => {
    expect(plan('duration_range 40')).toBe('about 40 s');
    expect(plan('duration_range 120')).toBe('about 2 minutes');
    expect(plan('duration_range 150')).toBe('about 2-3 minutes');
  });
});

describe('setup.sh --dry-run', () => {
  it('prints one line first, what it would do or that nothing is missing, and changes nothing', () => {
    const { stdout, status } = setup('--serve', '--dry-run');
    expect(status).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^setup: (.*; about \d+(-\d+)? (s|minutes)|nothing is missing: checking what is in place \(a few seconds\))$/);
  });
});
