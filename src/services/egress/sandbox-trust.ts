import type { Backend } from '../../backends/backend.js';

/** Where a sandbox finds the proxy's CA: the certificate alone, and the system's roots with it. */
export const CA_FILE = '/etc/sandboxd/egress-ca.pem';
export const CA_BUNDLE = '/etc/sandboxd/ca-bundle.pem';

/**
 * The variables that make the usual clients trust the proxy's CA: OpenSSL (curl, Python's ssl,
 * Ruby, git) through SSL_CERT_FILE, Python requests through REQUESTS_CA_BUNDLE, both the
 * system's roots plus the CA; Node.js through NODE_EXTRA_CA_CERTS, the CA alone (added to its own roots).
 */
export const CA_ENV: Readonly<Record<string, string>> = { SSL_CERT_FILE: CA_BUNDLE, REQUESTS_CA_BUNDLE: CA_BUNDLE, NODE_EXTRA_CA_CERTS: CA_FILE };

/**
 * Run as root with the CA's PEM on stdin: the CA goes to /usr/local/share/ca-certificates
 * (where update-ca-certificates finds it again), is appended once to each system bundle the
 * image has (Debian/Ubuntu/Alpine, RHEL, SUSE, /etc/ssl/cert.pem), and CA_FILE and CA_BUNDLE
 * are written. Idempotent: a bundle that holds the CA already is left as it is.
 */
const SCRIPT = `set -e
umask 022
ca="$(cat)"
mark="$(printf '%s\\n' "$ca" | sed -n 3p)"
mkdir -p /etc/sandboxd /usr/local/share/ca-certificates
printf '%s\\n' "$ca" > ${CA_FILE}
printf '%s\\n' "$ca" > /usr/local/share/ca-certificates/sandboxd-egress-ca.crt
system=""
for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/ca-bundle.pem /etc/ssl/cert.pem; do
  [ -f "$bundle" ] || continue
  [ -n "$system" ] || system="$bundle"
  grep -qF "$mark" "$bundle" || printf '%s\\n' "$ca" >> "$bundle"
done
if [ -n "$system" ]; then cat "$system" > ${CA_BUNDLE}; else printf '%s\\n' "$ca" > ${CA_BUNDLE}; fi
`;

/**
 * Makes the instance trust `caPem` (its certificate only: the key never leaves the server);
 * undefined when done, else what failed (no shell in the image, a read-only root, ...).
 */
export async function installCaTrust(backend: Backend, id: string, caPem: string): Promise<string | undefined> {
  try {
    const result = await backend.exec(id, { command: ['sh', '-c', SCRIPT], user: 'root', stdin: Buffer.from(caPem), timeout_ms: 30_000 });
    return result.exit_code === 0 ? undefined : `exit ${result.exit_code}: ${`${result.stderr}`.slice(0, 500)}`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
