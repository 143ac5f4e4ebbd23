import type { Backend, BackendCapabilities, CapabilityName } from '../../backends/backend.js';
import { capabilityNames } from '../../backends/backend.js';
import { UnsupportedError } from '../../errors.js';
import type { BackendCapability } from '../../schemas/service-schemas.js';

/** Each capability's wire name (GET /status). */
const WIRE_NAME: Record<CapabilityName, BackendCapability> = {
  snapshots: 'snapshots',
  archive: 'archive',
  resize: 'resize',
  poolClaim: 'pool_claim',
  detached: 'detached',
  browserRelay: 'browser_relay',
  reuse: 'reuse',
  workers: 'workers',
  diskQuota: 'disk_quota',
  gateway: 'gateway',
  fileViews: 'file_views',
  fileArchives: 'file_archives',
  volumes: 'volumes',
  terminal: 'terminal',
  egress: 'egress',
  ports: 'ports',
  imageBuild: 'image_build',
};

/** What each capability offers, as an UNSUPPORTED answer names it. */
const OFFERS: Record<CapabilityName, string> = {
  snapshots: 'snapshots',
  archive: 'archive',
  resize: 'resize',
  poolClaim: 'claiming warm pool instances',
  detached: 'detached commands',
  browserRelay: 'browser automation',
  reuse: 'reusing an instance for run after run',
  workers: 'persistent workers',
  diskQuota: "disk_mb: its storage cannot bound what a sandbox writes (README, 'Disk quota')",
  gateway: 'an address of the host its sandboxes reach (the LLM gateway and the egress proxy need one)',
  fileViews: 'file system views (listings, stat, watches)',
  fileArchives: 'directories packed and unpacked as tar archives',
  volumes: 'named volumes',
  terminal: 'terminals',
  egress: "network.egress: enforced egress (README, 'Security model')",
  ports: 'connections to ports inside a sandbox (preview URLs)',
  imageBuild: 'images built from a Dockerfile',
};

/**
 * The one place services check a backend's optional features: the capability when the backend
 * declares it, else UNSUPPORTED (HTTP 422) naming the backend and what it lacks.
 */
export function requireCapability<N extends CapabilityName>(backend: Backend, name: N): NonNullable<BackendCapabilities[N]> {
  const capability = backend.capabilities[name];
  if (!capability) throw new UnsupportedError(backend.name, OFFERS[name]);
  return capability as NonNullable<BackendCapabilities[N]>;
}

/** The capabilities a backend declares, by their wire names, for GET /status. */
export function declaredCapabilities(backend: Backend): BackendCapability[] {
  return capabilityNames(backend).map((name) => WIRE_NAME[name]);
}
