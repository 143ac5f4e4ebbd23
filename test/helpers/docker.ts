import { execFile } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import type { SandboxSpec } from '../../src/backends/backend.js';
import { AgentSockets } from '../../src/backends/docker/agent-sockets.js';
import { silentLogger } from '../../src/telemetry/logger.js';

const run = promisify(execFile);

/** The default image, which setup builds: default user `sandbox` (uid 1000), WORKDIR /workspace. */
export const TEST_IMAGE = 'sandboxd/base:bookworm';
/** TEST_IMAGE with root as its default user, for what the backend does with root images. */
export const ROOT_IMAGE = 'sandboxd-test/root:latest';

/** Runs the docker CLI; resolves with stdout. */
export async function docker(...args: string[]): Promise<string> {
  const { stdout } = await run('docker', args, { maxBuffer: 64 * 1024 * 1024 });
  return stdout.trim();
}

/** Derives ROOT_IMAGE from TEST_IMAGE when it is missing (no Dockerfile, no registry). */
export async function ensureTestImage(): Promise<void> {
  const present = await docker('image', 'inspect', ROOT_IMAGE).then(
    () => true,
    () => false,
  );
  if (present) return;
  const builder = `sandboxd-test-build-${randomBytes(4).toString('hex')}`;
  await docker('create', '--name', builder, TEST_IMAGE);
  try {
    await docker('commit', '--change', 'USER root', '--change', 'WORKDIR /', builder, ROOT_IMAGE);
  } finally {
    await docker('rm', '-f', builder);
  }
}

/** A name no other test run uses: `<prefix>-<random>`. */
export const uniqueName = (prefix: string): string => `${prefix}-${randomBytes(3).toString('hex')}`;

/**
 * Removes every container labelled with this service instance id (running or not), and the
 * instance's agent socket directories under the default runtime directory (sealed, so a plain
 * rm cannot).
 */
export async function removeInstanceContainers(instanceId: string): Promise<void> {
  const ids = await docker('ps', '-aq', '--filter', `label=sandboxd.instance=${instanceId}`);
  if (ids) await docker('rm', '-f', '-v', ...ids.split('\n'));
  await new AgentSockets({ dataDir: '/nonexistent', instanceId, logger: silentLogger() }).removeOrphans(new Set());
}

/** A moderate sandbox of TEST_IMAGE with a unique name and uuid, for backend tests. */
export const sandboxSpec = (overrides: Partial<SandboxSpec> = {}): SandboxSpec => ({
  name: uniqueName('t'),
  uuid: randomUUID(),
  image: TEST_IMAGE,
  vcpus: 1,
  memory_mb: 256,
  profile: 'moderate',
  env: {},
  ...overrides,
});
