import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { SandboxSpec } from '../../src/backends/backend.js';

const run = promisify(execFile);

/** A small image shaped like sandboxd/base: default user `sandbox` (uid 1000), WORKDIR /workspace. */
export const TEST_IMAGE = 'sandboxd-test/base:latest';
/** The image TEST_IMAGE is derived from (Debian with bash, coreutils, git, python3; user root). */
export const TRIAL_IMAGE = 'trial:base';

/** Runs the docker CLI; resolves with stdout. */
export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run('docker', args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

/** Builds TEST_IMAGE from TRIAL_IMAGE when it is missing (no Dockerfile, no registry). */
export async function ensureTestImage(): Promise<void> {
  const present = await docker('image', 'inspect', TEST_IMAGE).then(
    () => true,
    () => false,
  );
  if (present) return;
  const builder = `sandboxd-test-build-${randomBytes(4).toString('hex')}`;
  await docker('create', '--name', builder, '--entrypoint', '', TRIAL_IMAGE, 'sleep', 'infinity');
  try {
    await docker('start', builder);
    await docker(
      'exec',
      builder,
      'sh',
      '-c',
      'useradd -u 1000 -m -s /bin/bash sandbox && mkdir -p /workspace && chown sandbox:sandbox /workspace',
    );
    await docker('stop', '-t', '0', builder);
    await docker(
      'commit',
      '--change',
      'USER sandbox',
      '--change',
      'WORKDIR /workspace',
      '--change',
      'ENTRYPOINT []',
      '--change',
      'CMD ["bash"]',
      builder,
      TEST_IMAGE,
    );
  } finally {
    await docker('rm', '-f', builder);
  }
}

/** A name no other test run uses: `<prefix>-<random>`. */
export const uniqueName = (prefix: string): string => `${prefix}-${randomBytes(3).toString('hex')}`;

/** Removes every container labelled with this service instance id (running or not). */
export async function removeInstanceContainers(instanceId: string): Promise<void> {
  const ids = await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`);
  if (ids) await docker('rm', '-f', '-v', ...ids.split('\n'));
}

/** A moderate sandbox of TEST_IMAGE with a unique name and uuid, for backend tests. */
export const sandboxSpec = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: uniqueName('t'),
  uuid: randomUUID(),
  image: TEST_IMAGE,
  vcpus: 1,
  memoryMb: 256,
  profile: 'moderate',
  env: {},
  ...overrides,
});
