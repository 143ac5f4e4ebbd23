import type Docker from 'dockerode';
import { ServiceError, UnsupportedError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import { WORKSPACE, type UserIds } from './container-spec.js';
import { runExec } from './docker-exec.js';
import type { ClonedSource } from './git-source.js';

/** A writable root filesystem takes an archive before start: no tool is needed in the image. */
export async function copyIntoCreated(container: Docker.Container, source: ClonedSource, owner: UserIds): Promise<void> {
  const { stream, done } = source.archive(owner);
  try {
    await container.putArchive(stream, { path: '/' });
    await done;
  } finally {
    stream.destroy();
  }
}

/** A tmpfs /workspace exists only once the container runs: unpack through exec as its user. */
export async function copyIntoRunning(container: Docker.Container, source: ClonedSource, owner: UserIds, logger: Logger): Promise<void> {
  const { stream, done } = source.archive(owner);
  const stderr: Buffer[] = [];
  try {
    // Through the engine, which takes a streamed stdin; as the owner, not the agent's root.
    const outcome = await runExec(
      container,
      {
        command: ['tar', '-x', '--no-same-owner', '--strip-components=1', '-C', WORKSPACE, '-f', '-'],
        user: `${owner.uid}:${owner.gid}`,
        stdin: stream,
        onFrame: (kind, data) => void (kind === 'stderr' && stderr.push(data)),
      },
      logger,
    );
    if (outcome.exit_code === 127) throw new UnsupportedError('docker', `a source in a sandbox with a tmpfs ${WORKSPACE} (restrictive) whose image has no tar`);
    if (outcome.exit_code !== 0) {
      const reason = Buffer.concat(stderr).toString('utf8').trim().split('\n')[0];
      throw new ServiceError('INTERNAL', `copying the source into ${WORKSPACE} failed: ${reason || outcome.exit_code}`);
    }
    await done;
  } finally {
    // If the extraction stopped reading, the host tar would block on its pipe forever.
    stream.destroy();
  }
}
