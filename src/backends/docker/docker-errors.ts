import { badRequest, conflict, ServiceError } from '../../errors.js';

/** The parts of a dockerode / docker-modem failure this backend looks at. */
interface DockerFailure {
  statusCode?: number;
  code?: string;
  json?: { message?: string } | null;
  reason?: string;
  message?: string;
}

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ENOENT', 'ECONNRESET', 'EPIPE', 'ENOTCONN']);

/** HTTP status of an Engine API failure, if the engine answered at all. */
export function dockerStatus(err: unknown): number | undefined {
  return (err as DockerFailure | null)?.statusCode;
}

/** The engine's own message for a failure, without docker-modem's "(HTTP code 404) ..." prefix. */
export function dockerMessage(err: unknown): string {
  const failure = (err ?? {}) as DockerFailure;
  if (failure.json?.message) return failure.json.message.trim();
  // Streaming calls (pull) leave `json` empty; the engine's text is then in the message.
  const body = failure.message?.replace(/^\(HTTP code \d+\) [^-]*- /, '').trim();
  return body || failure.reason || String(err);
}

/**
 * Turns a failure to talk to the engine into BACKEND_UNAVAILABLE, so that a stopped dockerd is
 * a 503 with a remedy rather than a 500; any other error is returned unchanged.
 */
export function unreachableOr(err: unknown, socketPath: string): unknown {
  const code = (err as DockerFailure | null)?.code;
  if (code === 'EACCES') {
    return new ServiceError(
      'BACKEND_UNAVAILABLE',
      `permission denied on the Docker socket ${socketPath}: run sandboxd as root or in the docker group`,
    );
  }
  if (code && UNREACHABLE_CODES.has(code) && dockerStatus(err) === undefined) {
    return new ServiceError(
      'BACKEND_UNAVAILABLE',
      `Docker Engine is not reachable at ${socketPath}: start dockerd (${code})`,
    );
  }
  return err;
}

/** True when the engine answered 404 (no such container, image or exec). */
export const isNotFound = (err: unknown): boolean => dockerStatus(err) === 404;

/** Maps a failed container create: missing image, taken name, or whatever else the engine said. */
export function createError(err: unknown, image: string, name: string, hint?: (image: string) => string): unknown {
  const status = dockerStatus(err);
  if (status === 404) {
    const extra = hint?.(image);
    return new ServiceError('IMAGE_UNAVAILABLE', `image '${image}' is not available: ${dockerMessage(err)}${extra ? `; ${extra}` : ''}`);
  }
  if (status === 409) return conflict(`a container named '${name}' already exists`);
  if (status === 400) return badRequest(`the engine refused the sandbox: ${dockerMessage(err)}`);
  return err;
}

/** A catch handler that swallows the engine's answers with these statuses. */
export const ignoreStatus =
  (...statuses: number[]) =>
  (err: unknown): void => {
    if (!statuses.includes(dockerStatus(err) ?? 0)) throw err;
  };
