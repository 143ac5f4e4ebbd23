import { ServiceError } from '../../errors.js';
import type { ExecResultBody } from '../../schemas/exec-schemas.js';
import type { ApiClient } from '../../client/api-client.js';

/** Least time between two progress notifications of one command. */
const PROGRESS_INTERVAL_MS = 250;
/** Output kept for the reply; the tool shows its first and last 8 KB anyway (output-cap.ts). */
const MAX_KEPT_CHARS = 1024 * 1024;
/** Longest progress message: the last line the command printed. */
const MAX_MESSAGE_CHARS = 200;

/**
 * An exec through its event stream (`POST /sandboxes/{name}/exec/stream`), reporting progress
 * while the command prints: the characters printed so far, with the last line as the message.
 * Resolves with the result the waited-for exec would give; a stream that ends in `error` throws
 * its message.
 */
export async function execWithProgress(
  api: ApiClient,
  path: string,
  body: object,
  progress: (progress: number, message?: string) => void,
  signal: AbortSignal,
): Promise<ExecResultBody> {
  let output = '';
  let printed = 0;
  let lastReport = 0;
  let done: Omit<ExecResultBody, 'output' | 'stdout' | 'stderr'> | undefined;
  let failure: string | undefined;
  await api.stream(
    { method: 'POST', path, body },
    (event, data) => {
      const fields = data as Record<string, unknown>;
      if (event === 'output' && typeof fields.content === 'string') {
        printed += fields.content.length;
        if (output.length < MAX_KEPT_CHARS) output += fields.content.slice(0, MAX_KEPT_CHARS - output.length);
        const now = Date.now();
        if (now - lastReport >= PROGRESS_INTERVAL_MS) {
          lastReport = now;
          progress(printed, lastLine(fields.content));
        }
      } else if (event === 'done') {
        done = fields as typeof done;
      } else if (event === 'error') {
        failure = String(fields.message);
      }
    },
    signal,
  );
  if (failure !== undefined) throw new ServiceError('INTERNAL', failure);
  if (!done) throw new ServiceError('INTERNAL', 'the command stream ended without its result');
  return { ...done, truncated: done.truncated || printed > output.length, output, stdout: '', stderr: '' };
}

function lastLine(text: string): string | undefined {
  const line = text.trimEnd().split('\n').pop()?.trim() ?? '';
  return line ? line.slice(0, MAX_MESSAGE_CHARS) : undefined;
}
