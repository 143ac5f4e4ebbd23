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
  | 'SOURCE_UNAVAILABLE'
  | 'METHOD_FAILED'
  | 'IDEMPOTENCY_KEY_REUSED'
  | 'LIMIT_REACHED'
  | 'BUSY'
  | 'POLICY_DENIED'
  | 'READ_ONLY'
  | 'SQL_ERROR'
  | 'INTERNAL'
  | 'BACKEND_UNAVAILABLE'
  | 'EVENTS_DISABLED'
  | 'STORE_UNAVAILABLE'
  | 'BAD_GATEWAY'
  | 'TIMEOUT';

export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED: 422,
  IMAGE_UNAVAILABLE: 422,
  /**
   * A source_url that could not be cloned, for any reason (a refused destination, a network
   * failure, a missing ref, a limit): one answer for all, so that it tells nothing about the network.
   */
  SOURCE_UNAVAILABLE: 422,
  /** Code a client supplied (a durable object's method) threw; `details` says what it threw. */
  METHOD_FAILED: 422,
  /** An Idempotency-Key sent again with another method or body: not a repeat of the call it named. */
  IDEMPOTENCY_KEY_REUSED: 422,
  LIMIT_REACHED: 429,
  /** The resource is serving other calls; try again shortly. */
  BUSY: 429,
  /** A policy rule refused the request; the message names the rule. */
  POLICY_DENIED: 403,
  /** A statement that writes was sent where only reads are allowed. */
  READ_ONLY: 400,
  /** The store's engine refused the statement; `details` carries the engine's code. */
  SQL_ERROR: 400,
  INTERNAL: 500,
  BACKEND_UNAVAILABLE: 503,
  EVENTS_DISABLED: 503,
  /** An external store cannot be reached or refused the credentials. */
  STORE_UNAVAILABLE: 503,
  /** A program in a sandbox that a request is forwarded to did not answer (nothing listens on the port). */
  BAD_GATEWAY: 502,
  /** The operation did not finish within its time limit. */
  TIMEOUT: 504,
};

/**
 * What the client should do next, as data. Each face renders it in its own words: HTTP names
 * the route, MCP the tool, the command line the command. Field names are those of the wire
 * (the HTTP error envelope carries the step as `hint`).
 */
export type NextStep =
  /** Start the sandbox. */
  | { action: 'start'; sandbox: string }
  /**
   * Recover the archived sandbox. `then: 'start'` when the call needs it running (recovery
   * leaves it stopped); without `then`, recover first and repeat the call.
   */
  | { action: 'recover'; sandbox: string; then?: 'start' }
  /** Open the page (navigate it to a URL), which creates it. */
  | { action: 'browser_open'; sandbox: string; page: string }
  /** Take a new snapshot of the page; `use_refs` when the call should then use its refs. */
  | { action: 'browser_snapshot'; sandbox: string; page: string; use_refs?: boolean }
  /** List the directory (a file route was given one). */
  | { action: 'list_directory'; sandbox: string; path: string }
  /** See which images were built (an image name was not one of them). */
  | { action: 'list_images' }
  /** Create the named volume first. */
  | { action: 'create_volume'; volume: string }
  /** Send the statement to the store's execute op (`store` absent where the engine does not know the name). */
  | { action: 'store_execute'; store?: string }
  /** Use one of the ops the store's kind answers (query, execute, command). */
  | { action: 'store_ops'; store: string; ops: string[] }
  /** Register the object class first. */
  | { action: 'register_class'; class: string }
  /** Delete the proxy hook of that name first. */
  | { action: 'delete_proxy_hook'; hook: string }
  /** Store the provider's key in the gateway (`provider` absent where it is not known yet). */
  | { action: 'set_llm_key'; provider?: string }
  /** Mint a new terminal token for the sandbox. */
  | { action: 'mint_terminal_token'; sandbox: string };

/** Every action a next step can name. */
export type NextStepAction = NextStep['action'];

/**
 * How one face says each next step: a renderer per action, so the compiler makes every face
 * render every action. A renderer returns the clause that follows the error's message after
 * `: `, e.g. `start it with POST /sandboxes/x/start`.
 */
export type NextStepRenderers = { [A in NextStepAction]: (step: Extract<NextStep, { action: A }>) => string };

/** `message: <the face's words for the step>`, or the message alone without a step. */
export function withNextStep(message: string, hint: NextStep | undefined, renderers: NextStepRenderers): string {
  if (!hint) return message;
  const render = renderers[hint.action] as (step: NextStep) => string;
  return `${message}: ${render(hint)}`;
}

/** What an error may carry besides its code and message. */
export interface ErrorExtras {
  /** The next step, rendered by each face after the message. */
  hint?: NextStep;
  /** Structured facts about the failure (an engine's error code, a stack), sent beside the message. */
  details?: Record<string, unknown>;
}

/**
 * A failure with a code from the table and a message fit to show a client. The message says
 * what is wrong; what to do about it, when there is something, is the `hint`, which each
 * face appends in its own words (see `withNextStep`).
 */
export class ServiceError extends Error {
  readonly hint: NextStep | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    { hint, details }: ErrorExtras = {},
  ) {
    super(message);
    this.name = 'ServiceError';
    this.hint = hint;
    this.details = details;
  }
}

export const badRequest = (message: string, extras?: ErrorExtras) => new ServiceError('BAD_REQUEST', message, extras);
export const notFound = (message: string, extras?: ErrorExtras) => new ServiceError('NOT_FOUND', message, extras);
export const conflict = (message: string, extras?: ErrorExtras) => new ServiceError('CONFLICT', message, extras);
export const forbidden = (message: string, extras?: ErrorExtras) => new ServiceError('FORBIDDEN', message, extras);
/** A fault of the program, never of the client (HTTP 500): an invariant the code relies on did not hold. */
export const internalError = (message: string) => new ServiceError('INTERNAL', message);

/**
 * `value` when it is present; otherwise INTERNAL naming `what` was missing. For a value the
 * program's own bookkeeping guarantees (a map entry written just before) but its type cannot show.
 */
export function present<T>(value: T | null | undefined, what: string): T {
  if (value === null || value === undefined) throw internalError(`${what} is missing`);
  return value;
}
/** A write that found the file system full (ENOSPC): a quota or a full device, not a fault of the server. */
export const noSpace = (path?: string) =>
  new ServiceError('PAYLOAD_TOO_LARGE', `no space left on the device that holds ${path ? `'${path}'` : 'the file'}`);

/** Raised by a backend for an operation it does not offer (HTTP 422). */
export class UnsupportedError extends ServiceError {
  constructor(backend: string, operation: string) {
    super('UNSUPPORTED', `the '${backend}' backend does not support ${operation}`);
    this.name = 'UnsupportedError';
  }
}

/**
 * A worker (a long-lived process answering one line per call, see the `workers` capability)
 * that exited or printed something other than its answer during a call; the worker is gone.
 * `details.reason` is `exited` (with `exit_code`) or `garbage` (with the first bytes of the
 * line), and `details.stderr` holds what it printed to stderr.
 */
export class WorkerFailed extends ServiceError {
  constructor(message: string, details: { reason: 'exited' | 'garbage'; exit_code?: number; oom_killed?: true; line?: string; stderr: string }) {
    super('METHOD_FAILED', message, { details });
    this.name = 'WorkerFailed';
  }
}

export const isServiceError = (err: unknown): err is ServiceError => err instanceof ServiceError;
