import { randomBytes } from 'node:crypto';
import type { Duplex, Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Logger } from '../../telemetry/logger.js';
import { envList, type ExecOutcome, type FrameExec, type FrameHandler } from '../exec-frames.js';

/**
 * Every exec carries this variable with a fresh random tag. Children inherit it, so the tag
 * finds the command's whole process tree later, even processes that left its process group or
 * were re-parented to init. It works the same under runc and gVisor, where host PIDs are of no use.
 */
export const EXEC_TAG_VAR = 'SANDBOXD_EXEC_TAG';

/**
 * Kills, from inside the container, every process whose environment holds `$1`. It uses
 * builtins only (`read`, `kill`): once started it forks nothing, so a fork bomb that holds the
 * pids limit cannot stop it halfway. `read` drops the NUL separators of /proc/N/environ, which
 * is harmless for a substring match. It repeats until a round finds nothing, to catch children
 * forked while it ran.
 */
const KILL_SCRIPT = `tag="$1"; round=0
while [ "$round" -lt 100 ]; do
  hit=
  for file in /proc/[0-9]*/environ; do
    { while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in *"$tag"*) pid=\${file#/proc/}; kill -KILL "\${pid%/environ}" && hit=1; break;; esac
      done < "$file"; } 2>/dev/null
  done
  [ -z "$hit" ] && exit 0
  round=$((round + 1))
done
exit 1`;

/** How long a killed exec's stream may take to close before it is cut. */
const DRAIN_AFTER_KILL_MS = 3_000;
const KILL_ATTEMPTS = 5;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * How runc and gVisor word a command they could not find. The engine reports it with exit code
 * 126, where shells (and so clients) expect 127 for "command not found".
 */
const NOT_FOUND_REFUSAL = /^OCI runtime exec failed: .*(executable file not found|no such file or directory)/;

/**
 * Runs one command through the Engine API and streams its output frames, in arrival order,
 * to `onFrame`. On timeout or abort it kills the command's process tree and resolves with
 * exit code 124 (timeout) or the command's own code (abort; 137 if the engine has none).
 * A command that does not exist exits 127, as in a shell. -1 means the engine never reported
 * an exit code. Engine errors are thrown as they come
 * (the caller maps them).
 */
export async function runExec(container: Docker.Container, request: FrameExec, logger: Logger): Promise<ExecOutcome> {
  const tag = randomBytes(16).toString('hex');
  const withStdin = request.stdin !== undefined;
  const exec = await container.exec({
    Cmd: request.command,
    AttachStdin: withStdin,
    AttachStdout: true,
    AttachStderr: true,
    Tty: false,
    Env: [...envList(request.env), `${EXEC_TAG_VAR}=${tag}`],
    WorkingDir: request.workdir,
    User: request.user,
  });
  const socket = await exec.start({ hijack: true, stdin: withStdin });
  let timedOut = false;
  let aborted = false;
  let killing: Promise<void> | undefined;
  const terminate = () => {
    killing ??= killTagged(container, tag, request.user, logger).finally(() => {
      // A process that escaped the kill may hold the stream open; do not wait on it forever.
      setTimeout(() => socket.destroy(), DRAIN_AFTER_KILL_MS).unref();
    });
  };
  const onAbort = () => {
    aborted = true;
    terminate();
  };
  const timer =
    request.timeout_ms === undefined
      ? undefined
      : setTimeout(
          () => {
            timedOut = true;
            terminate();
          },
          // Node fires longer delays at once; ~24.8 days is forever for an exec.
          Math.min(request.timeout_ms, MAX_TIMER_MS),
        );
  request.signal?.addEventListener('abort', onAbort, { once: true });
  if (request.signal?.aborted) onAbort();
  let firstFrame = '';
  const onFrame: FrameHandler = (stream, data) => {
    firstFrame ||= data.subarray(0, 1024).toString('utf8');
    request.onFrame(stream, data);
  };
  try {
    await pumpStream(socket, request.stdin, onFrame);
  } finally {
    clearTimeout(timer);
    request.signal?.removeEventListener('abort', onAbort);
  }
  await killing;
  const exitCode = await exitCodeOf(exec);
  if (timedOut) return { exit_code: 124, timed_out: true, aborted: false };
  if (exitCode === 126 && NOT_FOUND_REFUSAL.test(firstFrame)) return { exit_code: 127, timed_out: false, aborted };
  return { exit_code: exitCode ?? (aborted ? 137 : -1), timed_out: false, aborted };
}

/** Feeds stdin (then half-closes) and demultiplexes output until the engine closes the stream. */
function pumpStream(socket: Duplex, stdin: Buffer | Readable | undefined, onFrame: FrameHandler): Promise<void> {
  return new Promise((resolve) => {
    const demuxer = new FrameDemuxer(onFrame);
    socket.on('data', (chunk: Buffer) => demuxer.push(chunk));
    // A command may exit without reading all its stdin; the broken pipe that follows is not a failure.
    socket.on('error', () => socket.destroy());
    socket.once('close', () => resolve());
    socket.once('end', () => socket.destroy());
    if (stdin === undefined) return;
    if (Buffer.isBuffer(stdin)) socket.end(stdin);
    else {
      stdin.on('error', () => socket.destroy());
      stdin.pipe(socket);
    }
  });
}

/** The exit code of a finished exec; the engine may record it a moment after the stream ends. */
async function exitCodeOf(exec: Docker.Exec): Promise<number | null> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const info = await exec.inspect();
    if (!info.Running && info.ExitCode !== null) return info.ExitCode;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return null;
}

/**
 * Kills every process carrying `tag`, as the user the command ran as (with no capabilities,
 * root may only signal its own processes). A fork bomb can make the kill exec itself fail to
 * start for a moment, hence the retries.
 */
async function killTagged(container: Docker.Container, tag: string, user: string | undefined, logger: Logger) {
  for (let attempt = 1; attempt <= KILL_ATTEMPTS; attempt++) {
    try {
      const outcome = await runExec(
        container,
        { command: ['sh', '-c', KILL_SCRIPT, 'sandboxd-kill', `${EXEC_TAG_VAR}=${tag}`], user, onFrame: () => {} },
        logger,
      );
      if (outcome.exit_code === 0) return;
    } catch (err) {
      logger.debug({ err, attempt }, 'kill exec failed to run');
    }
    await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
  }
  logger.warn({ container: container.id }, 'could not kill a timed-out command; its processes may linger');
}

/**
 * Splits the Engine API's multiplexed stream: frames of an 8-byte header (stream type, three
 * zero bytes, big-endian payload size) and a payload.
 */
class FrameDemuxer {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly onFrame: FrameHandler) {}

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    while (this.pending.length >= 8) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) return;
      // 1 is stdout; 2 is stderr and 3 the engine's own error text, both shown as stderr.
      const stream = this.pending[0] === 1 ? 'stdout' : 'stderr';
      const payload = this.pending.subarray(8, 8 + size);
      this.pending = this.pending.subarray(8 + size);
      if (payload.length > 0) this.onFrame(stream, payload);
    }
  }
}
