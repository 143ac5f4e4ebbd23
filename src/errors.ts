/**
 * The one table of error codes. Every failure the service reports carries one of these
 * codes; the HTTP layer maps the code to its status through `STATUS_BY_CODE`, and the
 * compiler forces a status for every code.
 */
export type ErrorCode =
  | 'BAD_REQUEST'
  | 'UNAUTHORIZED'
  | 'FORBIDDEN'
  | 'NOT_FOUND'
  | 'CONFLICT'
  | 'PAYLOAD_TOO_LARGE'
  | 'UNSUPPORTED'
  | 'IMAGE_UNAVAILABLE'
  | 'LIMIT_REACHED'
  | 'INTERNAL'
  | 'BACKEND_UNAVAILABLE'
  | 'EVENTS_DISABLED';

export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED: 422,
  IMAGE_UNAVAILABLE: 422,
  LIMIT_REACHED: 429,
  INTERNAL: 500,
  BACKEND_UNAVAILABLE: 503,
  EVENTS_DISABLED: 503,
};

/** A failure with a code from the table and a message fit to show a client. */
export class ServiceError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'ServiceError';
  }
}

export const badRequest = (message: string) => new ServiceError('BAD_REQUEST', message);
export const notFound = (message: string) => new ServiceError('NOT_FOUND', message);
export const conflict = (message: string) => new ServiceError('CONFLICT', message);
export const forbidden = (message: string) => new ServiceError('FORBIDDEN', message);

/** Raised by a backend for an operation it does not offer (HTTP 422). */
export class UnsupportedError extends ServiceError {
  constructor(backend: string, operation: string) {
    super('UNSUPPORTED', `the '${backend}' backend does not support ${operation}`);
    this.name = 'UnsupportedError';
  }
}

export const isServiceError = (err: unknown): err is ServiceError => err instanceof ServiceError;
