import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { ServiceError } from '../../errors.js';
import { validateSource } from '../source-validation.js';
import type { UserIds } from './container-spec.js';

const CLONE_TIMEOUT_MS = 120_000;

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

/**
 * Clones on the host (the image may lack git and a restrictive sandbox has no network):
 * shallow for a branch or tag, in full then checked out for a commit id. Git runs with a clean
 * environment, no prompts, no submodules and no local transports.
 */
export async function cloneSource(source: { url: string; ref?: string }): Promise<ClonedSource> {
  validateSource(source);
  const dir = await mkdtemp(join(tmpdir(), 'sandboxd-source-'));
  const tree = join(dir, 'workspace');
  try {
    const { url, ref } = source;
    if (ref !== undefined && COMMIT_SHA.test(ref)) {
      await git(['clone', '--no-checkout', '--no-recurse-submodules', '--', url, tree]);
      await git(['-C', tree, 'checkout', '--detach', ref]);
    } else {
      const branch = ref === undefined ? [] : ['--branch', ref];
      await git(['clone', '--depth', '1', '--no-recurse-submodules', ...branch, '--', url, tree]);
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    archive: (owner) => tarTree(dir, owner),
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
}

/** Runs git; BAD_REQUEST with git's last stderr line when it fails. */
function git(args: string[]): Promise<void> {
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    // HOME lets the operator's git config and ssh keys serve private repositories.
    ...(process.env.HOME ? { HOME: process.env.HOME } : {}),
    LC_ALL: 'C',
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_SSH_COMMAND: 'ssh -o BatchMode=yes',
  };
  const hardening = ['-c', 'protocol.file.allow=never', '-c', 'protocol.ext.allow=never', '-c', 'core.hooksPath=/dev/null'];
  return new Promise((resolve, reject) => {
    // Its own process group, so that a timeout also ends git's helpers (ssh, git-remote-http).
    const child = spawn('git', [...hardening, ...args], { env, detached: true, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-4096);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }, CLONE_TIMEOUT_MS);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(new ServiceError('SOURCE_UNAVAILABLE', `source_url: git clone failed: ${err.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      const lastLine = stderr.trim().split('\n').pop()?.trim();
      const reason = timedOut ? `timed out after ${CLONE_TIMEOUT_MS / 1000} s` : lastLine || `git exited with ${code}`;
      // The request was valid (it passed validation); the network or the remote failed it.
      reject(new ServiceError('SOURCE_UNAVAILABLE', `source_url: git clone failed: ${reason}`));
    });
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
