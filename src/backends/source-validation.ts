import { badRequest } from '../errors.js';

const NETWORK_URL = /^(https?|ssh|git):\/\//i;
/** scp-like `user@host:path`; neither part may look like an option. */
const SCP_LIKE = /^(?!-)[A-Za-z0-9._-]+@(?!-)[A-Za-z0-9.-]+:(?!\/\/)\S+$/;
const SAFE_REF = /^(?!-)[^\s\0-\x1f\\]{1,255}$/;

/**
 * Rejects anything but a network git URL: `file://`, host paths and option-like strings would
 * let a client read the server's own files into a sandbox.
 */
export function validateSource(source: { url: string; ref?: string }): void {
  const { url, ref } = source;
  if (!isNetworkUrl(url) && !SCP_LIKE.test(url)) {
    throw badRequest('source_url: must be an https://, http://, ssh:// or git:// URL or git@host:path');
  }
  if (ref !== undefined && !SAFE_REF.test(ref)) throw badRequest(`source_ref: '${ref}' is not a valid git ref`);
}

function isNetworkUrl(url: string): boolean {
  if (!NETWORK_URL.test(url) || !URL.canParse(url)) return false;
  const { hostname, username } = new URL(url);
  return hostname !== '' && !hostname.startsWith('-') && !username.startsWith('-');
}

