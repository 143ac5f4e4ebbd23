import { ServiceError, badRequest, forbidden, noSpace, notFound } from '../../errors.js';
import type { ExecOutcome, FrameExec } from '../exec-frames.js';

/**
 * File operations through the Engine API's exec, for sandboxes whose agent does not answer.
 * They run as small POSIX sh scripts: they work in any image with
 * /bin/sh, on tmpfs mounts and under gVisor, and as the image's default user, so that written
 * files belong to that user. The path is always an argument ($1), never part of the script.
 */

/** Largest file `readFile` returns; a file must fit in a reply, but not in the 8 MiB exec cap. */
export const MAX_READ_BYTES = 64 * 1024 * 1024;
const FILE_OP_TIMEOUT_MS = 120_000;
/** Error texts are matched, so they must be in English. */
const FILE_OP_ENV = { LC_ALL: 'C' };

const READ_SCRIPT = '[ -d "$1" ] && exit 3; exec cat -- "$1"';

/**
 * On failure the script still drains stdin: a writer that stopped reading would break the pipe,
 * and the engine would close the stream before the error text reached us.
 */
const WRITE_SCRIPT = `fail() { cat > /dev/null; exit "$1"; }
[ -d "$1" ] && fail 3
dir=\${1%/*}
if [ -n "$dir" ]; then mkdir -p -- "$dir" || fail 4; fi
cat > "$1" || fail 5`;

const DELETE_SCRIPT = '[ -e "$1" ] || [ -L "$1" ] || exit 3; exec rm -rf -- "$1"';

/** Runs one exec in the sandbox (engine errors already mapped to service errors). */
export type ExecRunner = (request: FrameExec) => Promise<ExecOutcome>;

/** The file's bytes; NOT_FOUND, BAD_REQUEST for a directory, FORBIDDEN when unreadable. */
export async function readFile(run: ExecRunner, path: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const stderr: Buffer[] = [];
  let size = 0;
  const overflow = new AbortController();
  const outcome = await run({
    command: ['sh', '-c', READ_SCRIPT, 'sh', path],
    env: FILE_OP_ENV,
    timeout_ms: FILE_OP_TIMEOUT_MS,
    signal: overflow.signal,
    onFrame: (stream, data) => {
      if (stream === 'stderr') return void stderr.push(data);
      size += data.length;
      if (size > MAX_READ_BYTES) overflow.abort();
      else chunks.push(data);
    },
  });
  if (outcome.aborted) throw tooLarge(path);
  if (outcome.exit_code === 3) throw badRequest(`'${path}' is a directory`);
  if (outcome.exit_code !== 0) throw fileError('reading', path, outcome, stderr);
  return Buffer.concat(chunks);
}

/** The refusal of a file past MAX_READ_BYTES. */
export function tooLarge(path: string): ServiceError {
  return new ServiceError('PAYLOAD_TOO_LARGE', `file '${path}' is larger than ${MAX_READ_BYTES / 1024 / 1024} MiB`);
}

/** Writes (replaces) a file, creating its parent directories. */
export async function writeFile(run: ExecRunner, path: string, content: Buffer): Promise<void> {
  const stderr: Buffer[] = [];
  const outcome = await run({
    command: ['sh', '-c', WRITE_SCRIPT, 'sh', path],
    env: FILE_OP_ENV,
    stdin: content,
    timeout_ms: FILE_OP_TIMEOUT_MS,
    onFrame: (stream, data) => void (stream === 'stderr' && stderr.push(data)),
  });
  if (outcome.exit_code === 3) throw badRequest(`'${path}' is a directory`);
  if (outcome.exit_code !== 0) throw fileError('writing', path, outcome, stderr);
}

/** Deletes a file, or a directory with everything in it. */
export async function deleteFile(run: ExecRunner, path: string): Promise<void> {
  const stderr: Buffer[] = [];
  const outcome = await run({
    command: ['sh', '-c', DELETE_SCRIPT, 'sh', path],
    env: FILE_OP_ENV,
    timeout_ms: FILE_OP_TIMEOUT_MS,
    onFrame: (stream, data) => void (stream === 'stderr' && stderr.push(data)),
  });
  if (outcome.exit_code === 3) throw notFound(`file '${path}' not found`);
  if (outcome.exit_code !== 0) throw fileError('deleting', path, outcome, stderr);
}

/** Classifies a failed file operation by the system error text of the tool that failed. */
function fileError(verb: string, path: string, outcome: ExecOutcome, stderr: Buffer[]): ServiceError {
  const text = Buffer.concat(stderr).toString('utf8').trim();
  if (text.includes('No such file or directory')) return notFound(`file '${path}' not found`);
  if (text.includes('Permission denied') || text.includes('Operation not permitted')) {
    return forbidden(`permission denied: ${path}`);
  }
  if (text.includes('Read-only file system')) return forbidden(`read-only file system: ${path}`);
  if (text.includes('Not a directory') || text.includes('File exists')) {
    return badRequest(`a parent of '${path}' is not a directory`);
  }
  if (text.includes('Device or resource busy')) return badRequest(`'${path}' is a mount point`);
  if (text.includes('No space left on device')) return noSpace(path);
  const reason = outcome.timed_out ? 'timed out' : text.split('\n').pop() || `exit code ${outcome.exit_code}`;
  return new ServiceError('INTERNAL', `${verb} ${path} failed: ${reason}`);
}
