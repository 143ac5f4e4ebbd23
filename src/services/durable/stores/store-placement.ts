import { EMBEDDED_STORE_KINDS, type StoreKind } from '../../../domain/store-kinds.js';
import { ServiceError } from '../../../errors.js';
import type { SandboxRecord } from '../../../state/sandbox-repository.js';
import type { SandboxesApi } from '../../sandboxes/api.js';
import { hostOf } from './store-credentials.js';
import type { StoreDestinations } from './store-destination.js';

/**
 * The host an external store connects to when its config names none and no sandbox gives one:
 * the engines' default, this machine. The allow-list is checked against it like any host.
 */
export const LOCAL_HOST = 'localhost';

/** Whether a kind's data lives on the host (or in a bound sandbox) rather than on a server. */
export const isEmbedded = (kind: StoreKind): boolean => EMBEDDED_STORE_KINDS.includes(kind);

/**
 * The host an external store connects to and the config field that names it; undefined when it
 * has no host and a bound sandbox (it connects to the sandbox's address, the operator's own,
 * which is not checked).
 */
export function configuredHost(config: Record<string, unknown>, bound: boolean): { host: string; field: string } | undefined {
  const host = hostOf(config);
  if (host === undefined && bound) return undefined;
  return { host: host ?? LOCAL_HOST, field: typeof config.host === 'string' || host === undefined ? 'config.host' : 'config.url' };
}

/**
 * Checks where an external store may point: its host must be allowed by `[stores].allowed_hosts`
 * and, when internal, named there (store-destination.ts: 400 naming config.host, or config.url
 * when the host is the url's; a name that does not resolve now is checked again at connect);
 * one with no host and a bound sandbox connects to the sandbox's address, which a restrictive
 * sandbox does not have (422).
 */
export async function checkPlacement(kind: StoreKind, config: Record<string, unknown>, sandbox: SandboxRecord | undefined, destinations: StoreDestinations): Promise<void> {
  if (isEmbedded(kind)) return;
  const target = configuredHost(config, sandbox !== undefined);
  if (target === undefined && sandbox) {
    if (sandbox.profile === 'restrictive') {
      throw new ServiceError(
        'UNSUPPORTED',
        `sandbox: '${sandbox.name}' is restrictive and has no network, so a ${kind} store cannot reach a server in it; give config.host`,
      );
    }
    return;
  }
  if (target) await destinations.check(target.host, target.field, 'pass');
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
