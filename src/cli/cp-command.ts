import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { basename, join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Command } from 'commander';
import { ServiceError } from '../errors.js';
import { apiPath, filePath } from '../client/api-client.js';
import type { ExecResultBody } from '../schemas/exec-schemas.js';
import { action, type ClientContext } from './client/client-context.js';
import type { Connection } from './client/connection.js';
import { printJson, UsageError } from './client/output.js';

/** `NAME:/path`: a path inside a sandbox. A local path that holds a colon is written `./a:b`. */
const REMOTE = /^([a-z0-9][a-z0-9_.-]{0,62}):(.*)$/;

interface Remote {
  sandbox: string;
  path: string;
}

/**
 * `sandboxd cp SRC DST`: a file's raw bytes, or a directory as a tar archive, between this
 * machine and a sandbox. The API moves single files (raw bytes); a directory is packed by
 * `tar` on one side, moved as one file through the sandbox's /tmp, and unpacked on the other.
 * As with `cp`, a destination that is an existing local directory, or a sandbox path ending
 * in `/`, receives the source under its own name.
 */
export function cpCommand(ctx: ClientContext): Command {
  return new Command('cp')
    .description('copy a file or directory: `cp ./local NAME:/path` or `cp NAME:/path ./local` (directories as tar)')
    .argument('<src>', './local or NAME:/path')
    .argument('<dst>', 'NAME:/path or ./local')
    .action(
      action(async (src: string, dst: string) => {
        const from = remote(src);
        const to = remote(dst);
        if (from && to) throw new UsageError('cp copies between this machine and a sandbox: one of SRC and DST must be local');
        if (!from && !to) throw new UsageError('cp needs a sandbox path, NAME:/path, as SRC or DST');
        const connection = ctx.connection();
        const copied = to ? await upload(connection, src, to) : from ? await download(connection, from, dst) : undefined;
        if (ctx.flags.json) printJson(copied);
      }),
    );
}

function remote(spec: string): Remote | undefined {
  const [, sandbox, path] = REMOTE.exec(spec) ?? [];
  if (sandbox === undefined || path === undefined) return undefined;
  if (!path.startsWith('/')) throw new UsageError(`'${spec}': the path inside the sandbox must be absolute, e.g. ${sandbox}:/workspace/file`);
  return { sandbox, path };
}

async function upload(connection: Connection, local: string, to: Remote): Promise<object> {
  // A missing file is a failure of the copy (exit 1), not of how sandboxd was called (exit 2).
  const info = await stat(local).catch(() => {
    throw new Error(`${local}: no such file or directory`);
  });
  const target = to.path.endsWith('/') ? posix.join(to.path, basename(local)) : to.path;
  if (!info.isDirectory()) {
    const bytes = await readFile(local);
    await putBytes(connection, to.sandbox, target, bytes);
    return { copied: 'file', to: `${to.sandbox}:${target}`, bytes: bytes.length };
  }
  const archive = await localTar(['-C', local, '-cf', '-', '.']);
  const tmp = scratchPath();
  await putBytes(connection, to.sandbox, tmp, archive);
  await sandboxShell(connection, to.sandbox, 'mkdir -p "$1" && tar -xf "$2" -C "$1"; status=$?; rm -f "$2"; exit $status', [target, tmp]);
  return { copied: 'directory', to: `${to.sandbox}:${target}`, bytes: archive.length };
}

async function download(connection: Connection, from: Remote, local: string): Promise<object> {
  const existing = await stat(local).catch(() => undefined);
  const target = existing?.isDirectory() ? join(local, posix.basename(from.path)) : local;
  const kind = (await sandboxShell(connection, from.sandbox, 'test -d "$1" && echo dir || echo file', [from.path])).trim();
  if (kind === 'file') {
    const response = await connection.open({ method: 'GET', path: filePath(from.sandbox, from.path), accept: 'application/octet-stream' });
    await pipeline(response, createWriteStream(target));
    return { copied: 'file', from: `${from.sandbox}:${from.path}`, to: target };
  }
  const tmp = scratchPath();
  await sandboxShell(connection, from.sandbox, 'tar -cf "$2" -C "$1" .', [from.path, tmp]);
  try {
    const response = await connection.open({ method: 'GET', path: filePath(from.sandbox, tmp), accept: 'application/octet-stream' });
    await mkdir(target, { recursive: true });
    await localTar(['-C', target, '-xf', '-'], response);
  } finally {
    await connection.api.request({ method: 'DELETE', path: filePath(from.sandbox, tmp) }).catch(() => undefined);
  }
  return { copied: 'directory', from: `${from.sandbox}:${from.path}`, to: target };
}

async function putBytes(connection: Connection, sandbox: string, path: string, bytes: Buffer): Promise<void> {
  const response = await connection.open({ method: 'PUT', path: filePath(sandbox, path), rawBody: bytes });
  response.resume();
}

/** A file name in the sandbox's /tmp for an archive in transit. */
const scratchPath = () => `/tmp/.sandboxd-cp-${randomBytes(6).toString('hex')}.tar`;

/** Runs `sh -c script sh ARGS...` in the sandbox (arguments as positional parameters: no quoting); its stdout, or its stderr as the error. */
async function sandboxShell(connection: Connection, sandbox: string, script: string, args: string[]): Promise<string> {
  const result = await connection.api.request<ExecResultBody>({
    method: 'POST',
    path: apiPath('sandboxes', sandbox, 'exec'),
    body: { command: ['sh', '-c', script, 'sh', ...args] },
  });
  if (result.exit_code !== 0) throw new ServiceError('BAD_REQUEST', `in sandbox ${sandbox}: ${result.stderr.trim() || `exit code ${result.exit_code}`}`);
  return result.stdout;
}

/** Runs the local `tar` with `input` on its stdin (when given); its stdout as bytes. */
function localTar(args: string[], input?: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const child = spawn('tar', args, { stdio: 'pipe' });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', (error) => reject(new Error(`cannot run tar here: ${error.message}`)));
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`tar ${args.join(' ')}: ${err.trim() || `exit code ${code}`}`))));
    if (input) input.pipe(child.stdin);
    else child.stdin.end();
  });
}
