import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, normalize } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cloneSource } from '../../../src/backends/docker/git-source.js';
import { AllowedHosts, checkDestination } from '../../../src/backends/source-destination.js';
import { isNotPublic } from '../../../src/domain/private-addresses.js';
import { silentLogger } from '../../../src/telemetry/logger.js';

const cleanups: Array<() => void | Promise<unknown>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An HTTP server on 127.0.0.1 that counts its requests; `handler` answers them. */
async function httpServer(handler: Parameters<typeof createServer>[1]): Promise<{ port: number; requests: string[] }> {
  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(req.url ?? '');
    handler!(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { port: (server.address() as AddressInfo).port, requests };
}

/**
 * A bare repository served over git's dumb HTTP protocol (static files), and its one commit.
 * Dumb HTTP cannot serve shallow clones, so tests clone it by commit (a full clone).
 */
async function servedRepository(): Promise<{ port: number; requests: string[]; commit: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-repo-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: dir } });
  git('init', '-q', '-b', 'main', 'work');
  writeFileSync(join(dir, 'work', 'hello.txt'), 'hello\n');
  git('-C', 'work', 'add', '.');
  git('-C', 'work', '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-q', '-m', 'one');
  git('clone', '-q', '--bare', 'work', 'repo.git');
  git('-C', 'repo.git', 'update-server-info');
  const commit = git('-C', 'repo.git', 'rev-parse', 'HEAD').toString().trim();
  const served = await httpServer((req, res) => {
    const path = normalize(join(dir, decodeURIComponent((req.url ?? '/').split('?')[0]!)));
    try {
      if (!path.startsWith(join(dir, 'repo.git')) || !statSync(path).isFile()) throw new Error('no file');
      res.end(readFileSync(path));
    } catch {
      res.writeHead(404).end();
    }
  });
  return { ...served, commit };
}

describe('source destinations', () => {
  it('takes public addresses and refuses loopback, private, link-local, CGNAT, multicast and reserved ones', () => {
    for (const address of ['140.82.112.3', '2606:4700::1111', '8.8.8.8']) expect(isNotPublic(address), address).toBe(false);
    for (const address of [
      '127.0.0.1', '127.9.9.9', '0.0.0.0', '0.1.2.3', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1',
      '100.64.0.1', '100.127.255.255', '169.254.169.254', '224.0.0.1', '239.1.1.1', '240.0.0.1', '255.255.255.255',
      '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1',
    ]) {
      expect(isNotPublic(address), address).toBe(true);
    }
  });

  it('refuses a host when any address it resolves to is not public, unless allowed', async () => {
    const resolve = async (host: string) => ({ mixed: ['140.82.112.3', '10.0.0.5'], public: ['140.82.112.3'], local: ['127.0.0.1'] })[host] ?? [];
    const none = new AllowedHosts([]);
    expect(await checkDestination('public', none, resolve)).toEqual({ address: '140.82.112.3' });
    expect(await checkDestination('mixed', none, resolve)).toHaveProperty('refused');
    expect(await checkDestination('nothing', none, resolve)).toHaveProperty('refused');
    expect(await checkDestination('local', new AllowedHosts(['local']), resolve)).toEqual({ address: '127.0.0.1' });
    expect(await checkDestination('local', new AllowedHosts(['127.0.0.0/8']), resolve)).toEqual({ address: '127.0.0.1' });
    expect(await checkDestination('mixed', new AllowedHosts(['10.0.0.5']), resolve)).toEqual({ address: '140.82.112.3' });
  });
});

describe('cloning a source_url', () => {
  const logger = silentLogger();
  const options = { allowedHosts: new AllowedHosts([]), logger };

  it('answers an open loopback port and a closed one with the same error, and sends nothing to either', async () => {
    const open = await httpServer((_req, res) => res.writeHead(404).end());
    const messages = [];
    for (const url of [`http://127.0.0.1:${open.port}/x.git`, 'http://127.0.0.1:1/x.git', `http://localhost:${open.port}/x.git`, 'git://[::1]/x', 'ssh://git@127.0.0.1/x']) {
      const failure = await cloneSource({ url }, options).then(
        () => undefined,
        (err: { code: string; message: string }) => ({ code: err.code, message: err.message }),
      );
      messages.push(failure);
    }
    expect(new Set(messages.map((m) => JSON.stringify(m)))).toEqual(
      new Set([JSON.stringify({ code: 'SOURCE_UNAVAILABLE', message: 'source_url: could not be cloned (the server log says why)' })]),
    );
    expect(open.requests).toEqual([]);
  });

  it('clones from an allowed host through the address that was checked, whatever DNS says later', async () => {
    const repo = await servedRepository();
    // `git.invalid` resolves nowhere: the clone can only have reached the server through the pinned address.
    const pinned = { allowedHosts: new AllowedHosts(['git.invalid']), logger, resolve: async () => ['127.0.0.1'] };
    const cloned = await cloneSource({ url: `http://git.invalid:${repo.port}/repo.git`, ref: repo.commit }, pinned);
    cleanups.push(() => cloned.dispose());
    const { stream, done } = cloned.archive({ uid: 0, gid: 0 });
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    await done;
    expect(Buffer.concat(chunks).includes('hello\n')).toBe(true);
    expect(repo.requests.length).toBeGreaterThan(0);
  });

  it('follows no redirect, and a failure on the network is the same single error', async () => {
    const repo = await servedRepository();
    const redirect = await httpServer((req, res) => res.writeHead(301, { Location: `http://127.0.0.1:${repo.port}${req.url}` }).end());
    const allowed = { allowedHosts: new AllowedHosts(['127.0.0.1']), logger };
    await expect(cloneSource({ url: `http://127.0.0.1:${redirect.port}/repo.git`, ref: repo.commit }, allowed)).rejects.toMatchObject({ code: 'SOURCE_UNAVAILABLE' });
    expect(repo.requests).toEqual([]);
    await expect(cloneSource({ url: `http://127.0.0.1:${repo.port}/repo.git`, ref: 'no-such-branch' }, allowed)).rejects.toMatchObject({
      code: 'SOURCE_UNAVAILABLE',
      message: 'source_url: could not be cloned (the server log says why)',
    });
  });
});
