import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/**
 * Apt sources for the image build, one `deb URI SUITE main` line each.
 *
 * mmdebstrap on its own always uses deb.debian.org and security.debian.org, which fails on a
 * host that can only reach a local or proxied mirror. So the build follows the host's apt:
 * the Debian-origin sources `apt-cache policy` reports, re-pointed at the image's suite
 * (a host on another release still lends its mirror). `SANDBOXD_DEBIAN_MIRROR=URI` overrides
 * this with that mirror's main suite alone. An empty list means "let mmdebstrap choose".
 */
export async function debianSources(suite: string, env: NodeJS.ProcessEnv = process.env): Promise<string[]> {
  const override = env.SANDBOXD_DEBIAN_MIRROR?.trim();
  if (override) return [`deb ${override} ${suite} main`];
  try {
    const { stdout } = await execFileAsync('apt-cache', ['policy'], { timeout: 15_000, maxBuffer: 4 * 1024 * 1024 });
    return sourcesFromPolicy(stdout, suite);
  } catch {
    // No apt on this host (or it failed): mmdebstrap's defaults are the best remaining guess.
    return [];
  }
}

/**
 * Parses `apt-cache policy` output: each ` 500 URI DIST/COMPONENT ARCH Packages` line is
 * followed by a `release ...,o=Origin,...,n=codename,...` line. Only `o=Debian` entries count
 * (not backports, not third-party repositories); their codename's suffix (`-updates`,
 * `-security`) is kept and applied to `suite`.
 */
export function sourcesFromPolicy(policy: string, suite: string): string[] {
  const lines = policy.split('\n');
  const sources: string[] = [];
  for (let i = 0; i < lines.length - 1; i++) {
    const entry = /^\s*-?\d+\s+(\S+:\/\/\S+)\s+(\S+)\/\S+\s+\S+\s+Packages\s*$/.exec(lines[i] ?? '');
    const release = /^\s*release\s+(.*)$/.exec(lines[i + 1] ?? '');
    if (!entry || !release) continue;
    const fields = new Map(
      (release[1] ?? '').split(',').map((pair) => {
        const at = pair.indexOf('=');
        return [pair.slice(0, at).trim(), pair.slice(at + 1).trim()] as const;
      }),
    );
    if (fields.get('o') !== 'Debian') continue;
    const codename = fields.get('n') ?? entry[2] ?? '';
    const dash = codename.indexOf('-');
    const suffix = dash < 0 ? '' : codename.slice(dash);
    if (suffix !== '' && suffix !== '-updates' && suffix !== '-security') continue; // backports, proposed-updates
    const line = `deb ${entry[1]} ${suite}${suffix} main`;
    if (!sources.includes(line)) sources.push(line);
  }
  // Without the main suite the bootstrap cannot work; defer to mmdebstrap's defaults instead.
  return sources.some((line) => line.endsWith(` ${suite} main`)) ? sources : [];
}
