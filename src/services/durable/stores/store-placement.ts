import { EMBEDDED_STORE_KINDS, type StoreKind } from '../../../domain/store-kinds.js';
import { badRequest, ServiceError } from '../../../errors.js';
import type { SandboxRecord } from '../../../state/sandbox-repository.js';
import type { SandboxesApi } from '../../sandboxes/api.js';
import { hostAllowed, hostOf } from './store-credentials.js';

/**
 * The host an external store connects to when its config names none and no sandbox gives one:
 * the engines' default, this machine. The allow-list is checked against it like any host.
 */
export const LOCAL_HOST = 'localhost';

/** Whether a kind's data lives on the host (or in a bound sandbox) rather than on a server. */
export const isEmbedded = (kind: StoreKind): boolean => EMBEDDED_STORE_KINDS.includes(kind);

/**
 * Checks where an external store may point: a host named in its config must match
 * `[stores].allowed_hosts` (400 naming config.host, or config.url when the host is the url's);
 * one with no host and a bound sandbox connects to the sandbox's address, which a restrictive
 * sandbox does not have (422). A sandbox's address is the operator's own: it is not checked.
 */
export function checkPlacement(kind: StoreKind, config: Record<string, unknown>, sandbox: SandboxRecord | undefined, allowedHosts: readonly string[]): void {
  if (isEmbedded(kind)) return;
  const host = hostOf(config);
  if (host === undefined && sandbox) {
    if (sandbox.profile === 'restrictive') {
      throw new ServiceError(
        'UNSUPPORTED',
        `sandbox: '${sandbox.name}' is restrictive and has no network, so a ${kind} store cannot reach a server in it; give config.host`,
      );
    }
    return;
  }
  const checked = host ?? LOCAL_HOST;
  if (!hostAllowed(checked, allowedHosts)) {
    const field = typeof config.host === 'string' || host === undefined ? 'config.host' : 'config.url';
    throw badRequest(`${field}: '${checked}' is not among the hosts stores may connect to (--store-allowed-hosts: ${allowedHosts.join(', ') || 'none'})`);
  }
}

/**
 * The address an external store with a bound sandbox and no host connects to: the sandbox's
 * bridge address, while it runs (409 with the next step otherwise).
 */
export async function sandboxAddress(sandboxes: SandboxesApi, kind: StoreKind, storeName: string, sandboxName: string): Promise<string> {
  const record = sandboxes.assertRunning(await sandboxes.require(sandboxName));
  const state = await sandboxes.observe(record);
  if (!state?.ip) {
    throw new ServiceError('STORE_UNAVAILABLE', `${kind} store '${storeName}': sandbox '${sandboxName}' has no network address to connect to`);
  }
  return state.ip;
}
