import { badRequest } from '../errors.js';

const URL_FORMS = [/^https?:\/\/[^\s/]+\/\S+$/i, /^ssh:\/\/[^\s/]+\/\S+$/i, /^git:\/\/[^\s/]+\/\S+$/i, /^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s-][^\s]*$/];

/**
 * A git source must be a remote repository: https, ssh, git or scp-like user@host:path.
 * file:// URLs, host paths and option-like values are refused, so a client cannot make
 * the server copy its own files into a sandbox.
 */
export function validateSourceUrl(url: string): void {
  if (url.startsWith('-') || !URL_FORMS.some((form) => form.test(url))) {
    throw badRequest(`source_url: '${url}' must be an https, ssh or git URL of a repository (file:// and host paths are not allowed)`);
  }
}
