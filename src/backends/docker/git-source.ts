import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { ServiceError } from '../../errors.js';
import type { Logger } from '../../telemetry/logger.js';
import { AllowedHosts, checkDestination, resolveHost, type Resolver } from '../source-destination.js';
import { validateSource } from '../source-validation.js';
import type { UserIds } from './container-spec.js';

/** Longest a clone may take. */
export const CLONE_TIMEOUT_MS = 120_000;
/** Most bytes a clone may put on the host's disk (its .git included). */
export const MAX_CLONE_BYTES = 1024 * 1024 * 1024;
/** How often the size of a clone under way is measured. */
const SIZE_CHECK_MS = 1_000;

/** A full or abbreviated commit id, which `--branch` cannot take. */
const COMMIT_SHA = /^[0-9a-f]{7,40}$/i;

/** A repository cloned on the host, ready to be copied into a sandbox's /workspace. */
export interface ClonedSource {
  /**
   * A tar stream of the work tree under a top-level `workspace/` directory, every entry owned
   * by `owner`, and a promise that rejects if `tar` fails. Destroying the stream ends `tar`.
   */
  archive(owner: UserIds): { stream: Readable; done: Promise<void> };
  /** Deletes the clone from the host. */
  dispose(): Promise<void>;
}

export interface CloneOptions {
  /** Hosts, addresses and ranges a clone may reach although they are not public. */
  allowedHosts: AllowedHosts;
  /** Where the reason of a failed clone goes; the client is told only that it failed. */
  logger: Logger;
  /** Host name resolution (tests). */
  resolve?: Resolver;
}

/**
 * The one answer to every clone that did not happen: whether the destination was refused, did
 * not answer, refused the connection or had no such ref, the client reads the same status and
 * message (the reason is in the server's log), so that clones cannot probe the host's network.
 */
export const sourceUnavailable = (): ServiceError =>
  new ServiceError('SOURCE_UNAVAILABLE', 'source_url: could not be cloned (the server log says why)');

/**
 * Clones on the host (the image may lack git and a restrictive sandbox has no network):
 * shallow for a branch or tag, in full then checked out for a commit id. Git runs with a clean
 * environment, no prompts, no submodules, no local transports and no redirects, connected to
 * the address that `checkDestination` accepted; the clone is bounded in time and in size.
 */
export async function cloneSource(source: { url: string; ref?: string }, options: CloneOptions): Promise<ClonedSource> {
  validateSource(source);
  const { logger } = options;
  const target = await pinnedTarget(source.url, options);
  if ('refused' in target) {
    logger.warn({ url: source.url, reason: target.refused }, 'source_url refused');
    throw sourceUnavailable();
  }
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-source-'));
  const tree = join(dir, 'workspace');
  try {
    const { ref } = source;
    const { url, config, ssh } = target;
    if (ref !== undefined && COMMIT_SHA.test(ref)) {
      await git([...config, 'clone', '--no-checkout', '--no-recurse-submodules', '--', url, tree], dir, ssh);
      await git(['-C', tree, 'checkout', '--detach', ref], dir, ssh);
    } else {
      const branch = ref === undefined ? [] : ['--branch', ref];
      await git([...config, 'clone', '--depth', '1', '--no-recurse-submodules', ...branch, '--', url, tree], dir, ssh);
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    logger.warn({ url: source.url, ref: source.ref, reason: (err as Error).message }, 'source_url clone failed');
    throw sourceUnavailable();
  }
  return {
    archive: (owner) => tarTree(dir, owner),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** What git is run with so that it connects to the checked address only. */
type PinnedTarget = { url: string; config: string[]; ssh: string[] } | { refused: string };

/**
 * The URL and git options of a clone whose host resolved to an accepted address: for http(s)
 * the name stays (TLS and virtual hosts need it) and curl is told its address
 * (`http.curloptResolve`); for git:// the address replaces the name; for ssh, ssh is told the
 * address (`-o HostName`), host keys still being checked under the name.
 */
async function pinnedTarget(url: string, options: CloneOptions): Promise<PinnedTarget> {
  const parsed = hostOf(url);
  if (!parsed) return { refused: `no host in ${url}` };
  const destination = await checkDestination(parsed.host, options.allowedHosts, options.resolve ?? resolveHost);
  if ('refused' in destination) return destination;
  const { address } = destination;
  const bracketed = address.includes(':') ? `[${address}]` : address;
  if (parsed.protocol === 'http' || parsed.protocol === 'https') {
    const port = parsed.port || (parsed.protocol === 'https' ? '443' : '80');
    return { url, config: ['-c', `http.curloptResolve=${parsed.host}:${port}:${bracketed}`], ssh: [] };
  }
  if (parsed.protocol === 'git') {
    const pinned = new URL(url);
    pinned.hostname = bracketed;
    return { url: pinned.toString(), config: [], ssh: [] };
  }
  return { url, config: [], ssh: ['-o', `HostName=${address}`] };
}

/** The host of a network URL or of scp-like `user@host:path`, without brackets. */
function hostOf(url: string): { protocol: string; host: string; port: string } | undefined {
  if (/^[a-z]+:\/\//i.test(url)) {
    const parsed = new URL(url);
    return { protocol: parsed.protocol.slice(0, -1).toLowerCase(), host: parsed.hostname.replace(/^\[(.*)\]$/, '$1'), port: parsed.port };
  }
  const host = /^[^@]+@([^:]+):/.exec(url)?.[1];
  return host ? { protocol: 'ssh', host, port: '' } : undefined;
}

/**
 * Runs git in its own process group with a time limit; while it runs, the size of `dir` is
 * measured and a clone past MAX_CLONE_BYTES is ended. Rejects with the reason, for the log.
 */
function git(args: string[], dir: string, sshOptions: string[]): Promise<void> {
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    // HOME lets the operator's git config and ssh keys serve private repositories.
    ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_SSH_COMMAND: ['ssh', '-o', 'BatchMode=yes', ...sshOptions].join(' '),
  };
  const hardening = [
    '-c', 'protocol.file.allow=never',
    '-c', 'protocol.ext.allow=never',
    '-c', 'core.hooksPath=/dev/null',
    // A redirect would lead the clone to a host that was never checked.
    '-c', 'http.followRedirects=false',
  ];
  return new Promise((resolve, reject) => {
    // Its own process group, so that a timeout also ends git's helpers (ssh, git-remote-http).
    const child = spawn('git', [...hardening, ...args], { env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-4096);
    });
    let stopped: string | undefined;
    const stop = (reason: string) => {
      stopped ??= reason;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => stop(`timed out after ${CLONE_TIMEOUT_MS / 1000} s`), CLONE_TIMEOUT_MS);
    const sizer = setInterval(() => {
      void diskUsage(dir).then((bytes) => {
        if (bytes > MAX_CLONE_BYTES) stop(`larger than ${MAX_CLONE_BYTES / 1024 / 1024} MiB`);
      });
    }, SIZE_CHECK_MS);
    const done = () => {
      clearTimeout(timer);
      clearInterval(sizer);
    };
    child.on('error', (err) => {
      done();
      reject(new Error(`git did not start: ${err.message}`));
    });
    child.on('close', (code) => {
      done();
      if (code === 0 && !stopped) return resolve();
      const lastLine = stderr.trim().split('\n').pop()?.trim();
      reject(new Error(stopped ?? (lastLine || `git exited with ${code}`)));
    });
  });
}

/** Bytes under `dir` (du's apparent size); 0 when it cannot be measured. */
function diskUsage(dir: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn('du', ['-sb', dir], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
    child.on('error', () => resolve(0));
    child.on('close', () => resolve(Number.parseInt(out, 10) || 0));
  });
}

/** Streams the host's `tar` of dir/workspace with every entry owned by `owner`. */
function tarTree(dir: string, owner: UserIds): { stream: Readable; done: Promise<void> } {
  const child = spawn(
    'tar',
    ['-c', '-C', dir, `--owner=${owner.uid}`, `--group=${owner.gid}`, '--numeric-owner', 'workspace'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
  });
  const done = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`tar of the source failed: ${stderr.trim()}`))));
  });
  // Marked as handled: a caller whose copy failed first never awaits it.
  done.catch(() => {});
  // Piped at once: Node discards the unread output of a child that has exited, and a small
  // tree is written out before the engine is ready to take it.
  const stream = child.stdout.pipe(new PassThrough());
  stream.on('close', () => {
    if (!child.stdout.readableEnded) child.kill('SIGKILL');
  });
  return { stream, done };
}

/**
 * Awaits two independent steps; if either fails, the other's result is cleaned up before the
 * failure is thrown (a clone must not outlive a missing image).
 */
export async function settleBoth<A, B>(
  first: Promise<A>,
  second: Promise<B>,
  cleanupSecond: (value: B) => Promise<void> | undefined,
): Promise<[A, B]> {
  const [a, b] = await Promise.allSettled([first, second]);
  if (a.status === 'fulfilled' && b.status === 'fulfilled') return [a.value, b.value];
  if (b.status === 'fulfilled') await cleanupSecond(b.value);
  throw a.status === 'rejected' ? a.reason : (b as PromiseRejectedResult).reason;
}
