/**
 * The rules every backend's `workers` capability keeps (the Docker backend's agent enforces
 * them again, agent/README.md "Workers"), so that a bad key or call gets the same answer from
 * every backend, before anything reaches a sandbox.
 */
import { badRequest, ServiceError } from '../errors.js';
import type { WorkerCall, WorkerRequest } from './types.js';

export const WORKER_LIMITS = {
  /** The longest line either way, its newline excluded (32 MiB). */
  max_line_bytes: 32 * 1024 * 1024,
  /** Workers one instance runs at once. */
  max_workers: 64,
  /** stderr kept per call: the most recent bytes. */
  stderr_bytes: 64 * 1024,
  /** How much of a line that is not an answer a `garbage` failure quotes. */
  garbage_bytes: 200,
  /** The longest `timeout_ms` of a call (one day). */
  max_timeout_ms: 24 * 60 * 60 * 1000,
} as const;

/** What a worker key may be: it names the worker in the agent's routes. */
export const WORKER_KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$/;

/** A nonce is printable ASCII without spaces, so that it never splits an answer line. */
const NONCE_PATTERN = /^[\x21-\x7e]{1,128}$/;

/** BAD_REQUEST naming the rule, for a key that is not one. */
export function checkWorkerKey(key: string): void {
  if (!WORKER_KEY_PATTERN.test(key)) {
    throw badRequest(`worker key '${key}': 1-128 characters of letters, digits and _.:@-, beginning with a letter or digit`);
  }
}

/** BAD_REQUEST for a request without a command. */
export function checkWorkerRequest(request: WorkerRequest): void {
  if (request.command.length === 0 || request.command[0] === '') throw badRequest('command: must be a non-empty array of strings');
}

/** BAD_REQUEST for a bad nonce, timeout or a line of two; PAYLOAD_TOO_LARGE past 32 MiB. */
export function checkWorkerCall(call: WorkerCall): void {
  if (!NONCE_PATTERN.test(call.nonce)) throw badRequest('nonce: 1-128 printable ASCII characters without spaces');
  if (!Number.isInteger(call.timeout_ms) || call.timeout_ms < 1 || call.timeout_ms > WORKER_LIMITS.max_timeout_ms) {
    throw badRequest(`timeout_ms: an integer from 1 to ${WORKER_LIMITS.max_timeout_ms}`);
  }
  if (call.line.includes('\n')) throw badRequest('line: holds a newline; a call is one line');
  if (Buffer.byteLength(call.line, 'utf8') > WORKER_LIMITS.max_line_bytes) {
    throw new ServiceError('PAYLOAD_TOO_LARGE', `line: over ${WORKER_LIMITS.max_line_bytes} bytes (32 MiB), the most a worker call carries`);
  }
}
