import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ServiceError } from '../errors.js';

/** How many of a build log's last lines a failure message quotes. */
const TAIL_LINES = 15;

/**
 * Hands each line of a build's log to `onLine` and keeps its last TAIL_LINES (`tail`) for a
 * failure message; `ended` resolves when the log does.
 */
export function followLog(input: NodeJS.ReadableStream, onLine: (line: string) => void): { tail: string[]; ended: Promise<void> } {
  const tail: string[] = [];
  const ended = new Promise<void>((resolve) => {
    createInterface({ input })
      .on('line', (line) => {
        tail.push(line);
        if (tail.length > TAIL_LINES) tail.shift();
        onLine(line);
      })
      .on('close', resolve);
  });
  return { tail, ended };
}

/**
 * Runs mmdebstrap, handing each line it logs (it logs to stderr) to `onLine`. Rejects with a
 * message that says what to do: install it when it is missing, otherwise the tail of its log
 * and the usual causes.
 */
export async function runMmdebstrap(args: string[], onLine: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const child = spawn('mmdebstrap', args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    // apt and dpkg inside the chroot must never wait for an answer.
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    signal,
  });
  const { tail } = followLog(child.stderr, onLine);

  const outcome = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; error?: NodeJS.ErrnoException }>(
    (resolve) => {
      child.once('error', (error: NodeJS.ErrnoException) => resolve({ code: null, signal: null, error }));
      child.once('close', (code, closedBy) => resolve({ code, signal: closedBy }));
    },
  );

  if (outcome.error?.code === 'ENOENT') {
    throw new ServiceError(
      'IMAGE_UNAVAILABLE',
      'mmdebstrap is not installed; run `npm run setup` (as root) or `apt-get install mmdebstrap`',
    );
  }
  if (outcome.error?.name === 'AbortError' || signal?.aborted) {
    throw new ServiceError('IMAGE_UNAVAILABLE', 'image build cancelled');
  }
  if (outcome.error || outcome.code !== 0) {
    const how = outcome.error?.message ?? (outcome.signal ? `killed by ${outcome.signal}` : `exit code ${outcome.code}`);
    throw new ServiceError(
      'IMAGE_UNAVAILABLE',
      `mmdebstrap failed (${how}). Its last lines:\n${tail.join('\n')}\n` +
        'Usual causes: the Debian mirror is unreachable (set SANDBOXD_DEBIAN_MIRROR=URI to use another), ' +
        'or not running as root (mmdebstrap then needs unprivileged user namespaces and /etc/subuid entries).',
    );
  }
}
