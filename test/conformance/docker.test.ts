import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DockerBackend } from '../../src/backends/docker/docker-backend.js';
import { silentLogger } from '../../src/telemetry/logger.js';
import { BROWSER_IMAGE } from '../helpers/browser-site.js';
import { docker, removeInstanceContainers, TEST_IMAGE, uniqueName } from '../helpers/docker.js';
import { backendConformance } from './backend-conformance.js';

const instanceId = uniqueName('conf');
const dataDir = mkdtempSync(join(tmpdir(), 'sandboxd-conformance-'));
const browserImage = await docker('image', 'inspect', BROWSER_IMAGE).then(
  () => true,
  () => false,
);

backendConformance({
  title: 'docker',
  make: async () => new DockerBackend({ instanceId, dataDir, logger: silentLogger() }),
  image: TEST_IMAGE,
  missingImage: 'sandboxd-test/missing:latest',
  imageTag: (name) => `sandboxd-conformance-${instanceId}:${name}`,
  relayImage: browserImage
    ? BROWSER_IMAGE
    : { skip: `${BROWSER_IMAGE} is not built (sandboxd images build browser; test/integration/api-browser.test.ts builds it and drives the relay)` },
  cleanup: async (backend) => {
    await removeInstanceContainers(instanceId);
    for (const tag of (await backend.capabilities.snapshots?.listImages()) ?? []) await backend.capabilities.snapshots!.removeImage(tag);
    rmSync(dataDir, { recursive: true, force: true });
  },
});
