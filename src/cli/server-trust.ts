import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';

/** Over HTTPS, the self-signed certificate a server keeps in its data directory is trusted besides the usual roots. */
export function trustFor(url: string, dataDir: string): { ca?: string[] } {
  const selfSigned = join(dataDir, 'tls', 'cert.pem');
  if (!url.startsWith('https:') || !existsSync(selfSigned)) return {};
  return { ca: [...rootCertificates, readFileSync(selfSigned, 'utf8')] };
}
