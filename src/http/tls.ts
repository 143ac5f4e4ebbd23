import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generate } from 'selfsigned';

/**
 * The certificate and key to serve HTTPS with: the configured files, or a self-signed
 * pair generated once and kept in `<data-dir>/tls/` so that clients can pin it.
 */
export async function loadTls(options: { cert?: string; key?: string; dataDir: string }): Promise<{ cert: string; key: string }> {
  if (options.cert && options.key) {
    return { cert: readFileSync(options.cert, 'utf8'), key: readFileSync(options.key, 'utf8') };
  }
  const dir = join(options.dataDir, 'tls');
  const certPath = join(dir, 'cert.pem');
  const keyPath = join(dir, 'key.pem');
  if (existsSync(certPath) && existsSync(keyPath)) {
    return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8') };
  }
  const pems = await generate([{ name: 'commonName', value: 'sandboxd' }], {
    keySize: 2048,
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 3 * 365 * 24 * 3600 * 1000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'subjectAltName', altNames: [{ type: 2, value: 'localhost' }, { type: 7, ip: '127.0.0.1' }, { type: 7, ip: '::1' }] },
    ],
  });
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(keyPath, pems.private, { mode: 0o600 });
  writeFileSync(certPath, pems.cert, { mode: 0o644 });
  return { cert: pems.cert, key: pems.private };
}
