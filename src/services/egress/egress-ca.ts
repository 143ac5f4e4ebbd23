import { webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import { createSecureContext, type SecureContext } from 'node:tls';
import {
  AuthorityKeyIdentifierExtension,
  BasicConstraintsExtension,
  cryptoProvider,
  ExtendedKeyUsage,
  ExtendedKeyUsageExtension,
  KeyUsageFlags,
  KeyUsagesExtension,
  PemConverter,
  SubjectAlternativeNameExtension,
  SubjectKeyIdentifierExtension,
  X509Certificate,
  X509CertificateGenerator,
} from '@peculiar/x509';
import type { ProxyRepository } from '../../state/proxy-repository.js';
import { isoNow, type Clock } from '../support/clock.js';
import type { SecretBox } from '../support/secret-box.js';

cryptoProvider.set(webcrypto as unknown as Parameters<typeof cryptoProvider.set>[0]);

const KEY_AAD = 'egress-ca:key';
const EC: webcrypto.EcKeyGenParams = { name: 'ECDSA', namedCurve: 'P-256' };
const SIGNING: webcrypto.EcdsaParams = { name: 'ECDSA', hash: 'SHA-256' };
const DAY_MS = 24 * 3600 * 1000;
/** A leaf is valid this long and made again when less than a day of it is left. */
const LEAF_DAYS = 30;
/** Leaves kept in memory (per host name); past it the oldest goes. */
const LEAF_CACHE = 1000;

interface OpenCa {
  cert: X509Certificate;
  key: webcrypto.CryptoKey;
  pem: string;
}

interface Leaf {
  context: SecureContext;
  renewAt: number;
}

/**
 * The egress proxy's certificate authority for TLS interception toward secret hosts: an ECDSA
 * P-256 CA made once per server (on first use) and kept in the state store, its private key
 * sealed with SecretBox (`egress-ca:key`), never written anywhere else; leaf certificates are
 * minted per host name from it and cached in memory. Sandboxes that hold a secret with
 * `intercept_tls` trust its certificate (`certificatePem`), never its key.
 */
export class EgressCa {
  private opening: Promise<OpenCa> | undefined;
  private readonly leaves = new Map<string, Promise<Leaf>>();

  constructor(private readonly input: { repo: ProxyRepository; box: SecretBox; clock: Clock }) {}

  /** The CA certificate (PEM), made and kept on first use. */
  async certificatePem(): Promise<string> {
    return (await this.open()).pem;
  }

  /** A TLS server context for `host` (a name or an IP) with a leaf certificate of this CA. */
  async contextFor(host: string): Promise<SecureContext> {
    const name = host.toLowerCase();
    const cached = this.leaves.get(name);
    if (cached) {
      const leaf = await cached.catch(() => undefined);
      if (leaf && leaf.renewAt > Date.now()) return leaf.context;
      if (this.leaves.get(name) === cached) this.leaves.delete(name);
    }
    const minting = this.mint(name);
    this.leaves.set(name, minting);
    if (this.leaves.size > LEAF_CACHE) this.leaves.delete(this.leaves.keys().next().value as string);
    minting.catch(() => this.leaves.delete(name));
    return (await minting).context;
  }

  private open(): Promise<OpenCa> {
    this.opening ??= this.load().catch((err: unknown) => {
      this.opening = undefined;
      throw err;
    });
    return this.opening;
  }

  private async load(): Promise<OpenCa> {
    const { repo, box, clock } = this.input;
    if (!(await repo.egressCa())) {
      const keys = await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']);
      const now = clock();
      const cert = await X509CertificateGenerator.createSelfSigned({
        serialNumber: serial(),
        name: 'CN=sandboxd egress proxy CA, O=sandboxd',
        notBefore: new Date(now.getTime() - DAY_MS),
        notAfter: new Date(now.getTime() + 10 * 365 * DAY_MS),
        signingAlgorithm: SIGNING,
        keys,
        extensions: [
          new BasicConstraintsExtension(true, 0, true),
          new KeyUsagesExtension(KeyUsageFlags.keyCertSign | KeyUsageFlags.cRLSign | KeyUsageFlags.digitalSignature, true),
          await SubjectKeyIdentifierExtension.create(keys.publicKey),
        ],
      });
      const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
      const keyPem = PemConverter.encode(pkcs8, 'PRIVATE KEY');
      await repo.putEgressCa({ cert: cert.toString('pem'), key: box.seal(keyPem, KEY_AAD), created_at: isoNow(clock) });
    }
    // Read back: when two makers raced, the one kept is the one used.
    const row = await repo.egressCa();
    if (!row) throw new Error('the egress CA was not kept in the state store');
    const keyPem = box.open(row.key, KEY_AAD);
    const key = await webcrypto.subtle.importKey('pkcs8', PemConverter.decodeFirst(keyPem), EC, false, ['sign']);
    return { cert: new X509Certificate(row.cert), key, pem: row.cert };
  }

  private async mint(host: string): Promise<Leaf> {
    const ca = await this.open();
    const keys = await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify']);
    const now = Date.now();
    const plain = host.replace(/^\[(.*)\]$/, '$1');
    const cert = await X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${isIP(plain) ? plain : host.replace(/[,+="\\<>;#]/g, '')}`,
      issuer: ca.cert.subject,
      notBefore: new Date(now - DAY_MS),
      notAfter: new Date(now + LEAF_DAYS * DAY_MS),
      signingAlgorithm: SIGNING,
      publicKey: keys.publicKey,
      signingKey: ca.key,
      extensions: [
        new BasicConstraintsExtension(false, undefined, true),
        new KeyUsagesExtension(KeyUsageFlags.digitalSignature, true),
        new ExtendedKeyUsageExtension([ExtendedKeyUsage.serverAuth]),
        new SubjectAlternativeNameExtension([isIP(plain) ? { type: 'ip', value: plain } : { type: 'dns', value: host }]),
        await SubjectKeyIdentifierExtension.create(keys.publicKey),
        await AuthorityKeyIdentifierExtension.create(ca.cert.publicKey),
      ],
    });
    const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
    const context = createSecureContext({ cert: `${cert.toString('pem')}\n${ca.pem}`, key: PemConverter.encode(pkcs8, 'PRIVATE KEY') });
    return { context, renewAt: now + (LEAF_DAYS - 1) * DAY_MS };
  }
}

/** A random positive 128-bit serial number (hex). */
function serial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return Buffer.from(bytes).toString('hex');
}
