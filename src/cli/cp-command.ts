import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { basename, join, posix } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Command } from 'commander';
import { apiPath, filePath } from '../client/api-client.js';
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
 * machine and a sandbox, in one call each way: a file through the files route, a directory
 * packed by `tar` here and unpacked by the archive route there, or the reverse. The sandbox's
 * audit log holds one entry per copy (`file_written`, `file_read` or `copied`).
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
    const response = await connection.open({ method: 'PUT', path: filePath(to.sandbox, target), rawBody: bytes });
    response.resume();
    return { copied: 'file', to: `${to.sandbox}:${target}`, bytes: bytes.length };
  }
  const archive = await localTar(['-C', local, '-cf', '-', '.']);
  const response = await connection.open({ method: 'PUT', path: archivePath(to.sandbox), query: { path: target }, rawBody: archive, contentType: TAR });
  const { data } = JSON.parse((await collect(response)).toString('utf8')) as { data: { entries: number; bytes: number } };
  return { copied: 'directory', to: `${to.sandbox}:${target}`, entries: data.entries, bytes: data.bytes };
}

async function download(connection: Connection, from: Remote, local: string): Promise<object> {
  const existing = await stat(local).catch(() => undefined);
  const target = existing?.isDirectory() ? join(local, posix.basename(from.path)) : local;
  const entry = await connection.api.request<{ type: string }>({ method: 'GET', path: apiPath('sandboxes', from.sandbox, 'fs', 'stat'), query: { path: from.path } });
  if (entry.type !== 'dir') {
    const response = await connection.open({ method: 'GET', path: filePath(from.sandbox, from.path), accept: 'application/octet-stream' });
    await pipeline(response, createWriteStream(target));
    return { copied: 'file', from: `${from.sandbox}:${from.path}`, to: target };
  }
  const response = await connection.open({ method: 'GET', path: archivePath(from.sandbox), query: { path: from.path }, accept: TAR });
  await mkdir(target, { recursive: true });
  await localTar(['-C', target, '-xf', '-'], response);
  return { copied: 'directory', from: `${from.sandbox}:${from.path}`, to: target };
}

const TAR = 'application/x-tar';
const archivePath = (sandbox: string) => apiPath('sandboxes', sandbox, 'archive');

async function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
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
    if (input) {
      // A stream cut by the server (a file that could not be read mid-way) fails the copy.
      input.on('error', (error) => {
        child.kill();
        reject(new Error(`the archive from the sandbox ended early: ${error.message}`));
      });
      input.pipe(child.stdin);
    } else child.stdin.end();
  });
}
