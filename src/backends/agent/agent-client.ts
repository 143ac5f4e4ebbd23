import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { noSpace, ServiceError, WorkerFailed, badRequest, conflict, forbidden, notFound } from '../../errors.js';
import { envList, type ExecOutcome, type FrameExec } from '../exec-frames.js';
import type { DetachedRequest, ExecRequest, TerminalRequest, TerminalSession, UnpackSummary, WorkerRequest } from '../types.js';
import { openAgentTerminal } from './agent-terminal.js';
import { openPortRelay } from './agent-port-relay.js';
import { AgentUnreachable, type AgentTransport } from './agent-transport.js';

/** Frame types of the agent's exec stream (agent/README.md). */
const FRAME = { stdout: 1, stderr: 2, exit: 3, error: 4 } as const;
const FRAME_HEADER = 5;

/** Longest a reset may take: it takes milliseconds; one stuck on a process that will not die is given up. */
const RESET_TIMEOUT_MS = 30_000;

/** Connection errors that mean the request never reached an agent, so it may be sent elsewhere. */
const NOT_DELIVERED = new Set(['ENOENT', 'ECONNREFUSED', 'ENOTSOCK']);

interface AgentRequest {
  method: string;
  path: string;
  body?: Buffer;
  signal?: AbortSignal;
}

/**
 * HTTP/1.1 to one sandbox's agent, on kept-alive connections that its transport opens (a Unix
 * socket on the host, or TLS over TCP off-host). A request that could not be delivered is tried
 * once more after the transport is reset (the agent recreates its socket when the sandbox
 * restarts), then fails with AgentUnreachable so that the caller can fall back to the engine.
 */
export class AgentClient {
  private readonly pool: Agent;
  private readonly workerCallSlackMs: number;

  /**
   * `workerCallSlackMs`: how long past a worker call's own time limit the agent's answer is
   * awaited; `idleMs`: how long an unused connection is kept (see connectionPool).
   */
  constructor(
    private readonly transport: AgentTransport,
    options: { workerCallSlackMs?: number; idleMs?: number } = {},
  ) {
    this.pool = connectionPool(transport, options.idleMs ?? IDLE_CONNECTION_MS);
    this.workerCallSlackMs = options.workerCallSlackMs ?? WORKER_CALL_SLACK_MS;
  }

  /** Runs a command; the same contract as the Engine API's `runExec`. */
  async exec(request: FrameExec): Promise<ExecOutcome> {
    if (request.stdin !== undefined && !Buffer.isBuffer(request.stdin)) throw new AgentUnreachable('streamed stdin goes through the engine');
    const body = Buffer.from(
      JSON.stringify({
        ...agentCommand(request),
        stdin: request.stdin?.toString('base64'),
        timeout_ms: request.timeout_ms,
        keep_background: request.keep_background,
      }),
    );
    let response: IncomingMessage;
    try {
      response = await this.send({ method: 'POST', path: '/v1/exec', body, signal: request.signal });
    } catch (err) {
      if (request.signal?.aborted) return { exit_code: 137, timed_out: false, aborted: true };
      throw err;
    }
    if (response.statusCode !== 200) throw await agentError(response);
    return readFrames(response, request);
  }

  /** A file's bytes; NOT_FOUND, BAD_REQUEST (a directory), FORBIDDEN; `tooLarge` past `maxBytes`. */
  async readFile(path: string, maxBytes: number, tooLarge: () => Error): Promise<Buffer> {
    const response = await this.send({ method: 'GET', path: filesPath(path) });
    if (response.statusCode !== 200) throw await agentError(response, path);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) {
        response.destroy();
        throw tooLarge();
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }

  /**
   * A file's bytes as the agent sends them, read as the caller takes them (no size limit);
   * NOT_FOUND, BAD_REQUEST (a directory), FORBIDDEN before the first byte.
   */
  async openFile(path: string): Promise<Readable> {
    const response = await this.send({ method: 'GET', path: filesPath(path) });
    if (response.statusCode !== 200) throw await agentError(response, path);
    return response;
  }

  /** Writes (replaces) a file as the sandbox's default user; parents are created. */
  async writeFile(path: string, content: Buffer): Promise<void> {
    const response = await this.send({ method: 'PUT', path: filesPath(path), body: content });
    if (response.statusCode !== 200) throw await agentError(response, path);
    response.resume();
  }

  /** Deletes a file or a directory tree. */
  async deleteFile(path: string): Promise<void> {
    const response = await this.send({ method: 'DELETE', path: filesPath(path) });
    if (response.statusCode !== 200) throw await agentError(response, path);
    response.resume();
  }

  /** A tar of what the directory holds, streamed as the agent packs it; refusals before the first byte. */
  async packDirectory(path: string): Promise<Readable> {
    const response = await this.send({ method: 'GET', path: archivePath(path) });
    if (response.statusCode !== 200) throw await archiveError(response, path);
    return response;
  }

  /** Unpacks a tar into the directory (made with its parents) as the sandbox's default user. */
  async unpackInto(path: string, archive: Buffer): Promise<UnpackSummary> {
    const response = await this.send({ method: 'PUT', path: archivePath(path), body: archive });
    if (response.statusCode !== 200) throw await archiveError(response, path);
    return JSON.parse((await collect(response)).toString('utf8')) as UnpackSummary;
  }

  /**
   * A GET about the sandbox's `path` whose 200 answer the caller reads (the file views,
   * agent-fs.ts); a refusal is mapped as for files.
   */
  async get(route: string, path: string, signal?: AbortSignal): Promise<IncomingMessage> {
    const response = await this.send({ method: 'GET', path: route, ...(signal ? { signal } : {}) });
    // The agent answers its own refusals in JSON; a plain 404 is a route it does not have.
    if (response.statusCode === 404 && !String(response.headers['content-type']).includes('json')) {
      response.resume();
      throw new ServiceError('UNSUPPORTED', `${route.split('?')[0]} in a sandbox whose agent predates it (made by an older sandboxd): recreate the sandbox`);
    }
    if (response.statusCode !== 200) throw await agentError(response, path, `path '${path}'`);
    return response;
  }

  /** Starts a detached command; the agent keeps it and the last 4 MiB of each stream. */
  async startDetached(request: DetachedRequest): Promise<AgentDetached> {
    return this.json<AgentDetached>('POST', '/v1/detached', Buffer.from(JSON.stringify(agentCommand(request))));
  }

  async listDetached(): Promise<AgentDetached[]> {
    return this.json<AgentDetached[]>('GET', '/v1/detached');
  }

  /**
   * One stream's kept output and the bytes the agent dropped before it (its position in the
   * stream); NOT_FOUND for an id the agent does not know.
   */
  async detachedLogs(id: string, stream: 'stdout' | 'stderr'): Promise<{ content: Buffer; start: number }> {
    const response = await this.send({ method: 'GET', path: `/v1/detached/${encodeURIComponent(id)}/logs?stream=${stream}` });
    if (response.statusCode !== 200) throw await agentError(response, undefined, `detached command '${id}'`);
    const dropped = Number(response.headers['x-sandboxd-dropped-bytes'] ?? 0);
    return { content: await collect(response), start: Number.isSafeInteger(dropped) && dropped > 0 ? dropped : 0 };
  }

  async killDetached(id: string): Promise<void> {
    await this.json('DELETE', `/v1/detached/${encodeURIComponent(id)}`);
  }

  /**
   * Starts worker `key` unless one runs with the same request (agent/README.md, "Workers").
   * A worker that cannot start fails as a shell would: `WorkerFailed`, reason `exited`, exit
   * code 127 (no such program) or 126 (cannot run it, unknown user, missing directory).
   */
  async ensureWorker(key: string, request: WorkerRequest): Promise<AgentWorker> {
    const response = await this.send({ method: 'PUT', path: workerPath(key), body: Buffer.from(JSON.stringify(agentCommand(request))) });
    if (response.statusCode === 200) return JSON.parse((await collect(response)).toString('utf8')) as AgentWorker;
    if (response.statusCode === 404) throw await olderAgent(response);
    const answer = await errorBody(response);
    if (response.statusCode === 422) {
      const stderr = `sandboxd-agent: ${answer.error}\n`;
      throw new WorkerFailed(`worker '${key}' could not start: ${answer.error}`, { reason: 'exited', exit_code: answer.exit_code ?? 126, stderr });
    }
    throw workerError(response.statusCode, key, answer);
  }

  /**
   * One call: the line to the worker's stdin, its answer line back. NOT_FOUND when the worker
   * does not run, TIMEOUT past `timeout_ms`, `WorkerFailed` when it exited or printed garbage
   * (the agent then has stopped it). The request itself is abandoned (which also stops the
   * worker) only well past the agent's own time limit.
   */
  async callWorker(key: string, call: { nonce: string; line: string; timeout_ms: number }): Promise<AgentWorkerReply> {
    const query = `nonce=${encodeURIComponent(call.nonce)}&timeout_ms=${call.timeout_ms}`;
    const signal = AbortSignal.timeout(call.timeout_ms + this.workerCallSlackMs);
    let response: IncomingMessage;
    let body: Buffer;
    try {
      response = await this.send({ method: 'POST', path: `${workerPath(key)}/call?${query}`, body: Buffer.from(call.line, 'utf8'), signal });
      body = await collect(response);
    } catch (err) {
      if (signal.aborted) throw new ServiceError('TIMEOUT', `worker '${key}' did not answer within ${call.timeout_ms} ms, nor did its sandbox's agent`);
      if (err instanceof AgentUnreachable || err instanceof ServiceError) throw err;
      throw new ServiceError('INTERNAL', `the sandbox agent closed the connection during a call to worker '${key}' (${(err as Error).message}): the sandbox may have stopped`);
    }
    if (response.statusCode === 200) return JSON.parse(body.toString('utf8')) as AgentWorkerReply;
    throw workerError(response.statusCode, key, parseError(body, response.statusCode));
  }

  /** Kills worker `key`'s process tree; a worker that does not run is not an error. */
  async stopWorker(key: string): Promise<void> {
    const response = await this.send({ method: 'DELETE', path: workerPath(key) });
    if (response.statusCode === 200 || response.statusCode === 404) return void response.resume();
    throw workerError(response.statusCode, key, await errorBody(response));
  }

  /** The running workers, by key. */
  async listWorkers(): Promise<AgentWorker[]> {
    const response = await this.send({ method: 'GET', path: '/v1/workers' });
    if (response.statusCode === 404) throw await olderAgent(response);
    if (response.statusCode !== 200) throw workerError(response.statusCode, '', await errorBody(response));
    return JSON.parse((await collect(response)).toString('utf8')) as AgentWorker[];
  }

  /**
   * Records the state that `reset` returns the sandbox to (agent/reset.go). With
   * `ipcNamespacePerCommand`, every later command runs in an IPC namespace of its own.
   * CONFLICT when the sandbox cannot be reused (a writable root filesystem).
   */
  async baseline(options: { ipcNamespacePerCommand: boolean }): Promise<void> {
    const body = Buffer.from(JSON.stringify({ ipc_namespace_per_command: options.ipcNamespacePerCommand }));
    const response = await this.send({ method: 'POST', path: '/v1/baseline', body });
    if (response.statusCode !== 200) throw await resetError(response, 'the sandbox cannot be reused');
    response.resume();
  }

  /**
   * Sets the sandbox's hostname from inside (a claimed gVisor pool instance, whose UTS namespace
   * the host cannot enter; agent/hostname.go); the agent then gives up the capability it took.
   * CONFLICT when the agent cannot (it was not made for a claim).
   */
  async setHostname(name: string): Promise<void> {
    const response = await this.send({ method: 'POST', path: '/v1/hostname', body: Buffer.from(JSON.stringify({ name })) });
    if (response.statusCode !== 200) throw await agentError(response, undefined, 'hostname');
    response.resume();
  }

  /**
   * Brings the sandbox back to its baseline; CONFLICT, naming what is left over, when it cannot.
   * A reset that takes longer than `timeoutMs` fails (the caller destroys the sandbox).
   */
  async reset(timeoutMs = RESET_TIMEOUT_MS): Promise<void> {
    const response = await this.send({ method: 'POST', path: '/v1/reset', signal: AbortSignal.timeout(timeoutMs) });
    if (response.statusCode !== 200) throw await resetError(response, 'the sandbox could not be reset');
    response.resume();
  }

  /** A shell on a pseudo-terminal, on a connection of its own (agent-terminal.ts). */
  openTerminal(request: TerminalRequest): Promise<TerminalSession> {
    return openAgentTerminal(this.transport, { cols: request.cols, rows: request.rows, env: envList(request.env) }, request.onOutput);
  }

  /** The agent's health, once it answers. */
  async health(): Promise<AgentHealth> {
    const response = await this.send({ method: 'GET', path: '/v1/health' });
    if (response.statusCode !== 200) {
      response.resume();
      throw new AgentUnreachable(`agent health: HTTP ${response.statusCode}`);
    }
    return JSON.parse((await collect(response)).toString('utf8')) as AgentHealth;
  }

  private async json<T>(method: string, path: string, body?: Buffer): Promise<T> {
    const response = await this.send({ method, path, ...(body ? { body } : {}) });
    if (response.statusCode !== 200) throw await agentError(response, undefined, `detached command '${path.split('/')[3] ?? ''}'`);
    return JSON.parse((await collect(response)).toString('utf8')) as T;
  }

  /** A connection to `port` on the sandbox's loopback (agent-port-relay.ts); BAD_GATEWAY when nothing listens. */
  openPort(port: number): Promise<Socket> {
    return openPortRelay(this.transport, port);
  }

  close(): void {
    this.pool.destroy();
  }

  private async send(request: AgentRequest): Promise<IncomingMessage> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(request);
      } catch (err) {
        if (!(err instanceof Undelivered)) throw err;
        this.transport.reset?.();
        if (attempt > 0) throw new AgentUnreachable(err.message);
      }
    }
  }

  /** One request; Undelivered when it provably never reached the agent. */
  private once(request: AgentRequest): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({
        agent: this.pool,
        method: request.method,
        path: request.path,
        headers: { ...this.transport.headers, 'content-length': request.body?.length ?? 0 },
        signal: request.signal,
      });
      req.once('response', resolve);
      req.on('error', (err: NodeJS.ErrnoException) => {
        // Nothing to connect to: the transport said so, and the caller may use another way.
        if (err instanceof AgentUnreachable) return reject(err);
        // A kept-alive connection the agent closed meanwhile (e.g. the sandbox restarted).
        const staleReuse = req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE');
        reject(NOT_DELIVERED.has(err.code ?? '') || staleReuse ? new Undelivered(err.message) : err);
      });
      req.end(request.body);
    });
  }
}

class Undelivered extends Error {}

/** How long a connection to an agent is kept once unused: a sandbox that idles holds none. */
const IDLE_CONNECTION_MS = 15_000;
/** Unused connections kept per agent after a burst: more are closed as their requests end. */
const MAX_IDLE_CONNECTIONS = 4;

/**
 * Node's keep-alive pool with the transport's connections in place of TCP ones: an Agent's
 * `createConnection` may hand its socket to the callback later, which lets `connect` be async.
 * Connections do not stay at a burst's peak: past MAX_IDLE_CONNECTIONS unused ones are closed,
 * and the rest after `idleMs` (the agent's `timeout` destroys only free sockets; a request in
 * flight is only told, and nothing here listens).
 */
function connectionPool(transport: AgentTransport, idleMs: number): Agent {
  const pool = new Agent({ keepAlive: true, maxSockets: 64, maxFreeSockets: MAX_IDLE_CONNECTIONS, timeout: idleMs });
  const create = (_options: unknown, done: (err: Error | null, socket?: Socket) => void): undefined => {
    transport.connect().then(
      (socket) => done(null, socket),
      (err: Error) => done(err),
    );
    return undefined;
  };
  Object.assign(pool, { createConnection: create });
  return pool;
}

/** What `GET /v1/health` answers. */
export interface AgentHealth {
  version: string;
  pid: number;
  default_user: string;
  /** Why the default user does not resolve in the sandbox (not in its /etc/passwd); absent when it does. */
  default_user_error?: string;
  uptime_seconds: number;
}

/**
 * A command in the agent's words (agent/README.md: `argv`, `cwd`, `env` as NAME=value), as
 * `/v1/exec`, `/v1/detached` and `/v1/workers` take it: the one conversion from the program's.
 */
function agentCommand(request: Pick<ExecRequest, 'command' | 'env' | 'workdir' | 'user'>): { argv: string[]; env?: string[]; cwd?: string; user?: string } {
  return {
    argv: request.command,
    ...(request.env ? { env: envList(request.env) } : {}),
    ...(request.workdir ? { cwd: request.workdir } : {}),
    ...(request.user ? { user: request.user } : {}),
  };
}

/** A worker as the agent reports it; `started` only in the answer to a PUT. */
export interface AgentWorker {
  key: string;
  pid: number;
  argv: string[];
  started?: boolean;
  started_at: string;
}

/** The answer to one worker call. */
export interface AgentWorkerReply {
  line: string;
  stderr: string;
  duration_us: number;
}

/** An agent's refusal of a worker request (agent/README.md, "Workers"). */
interface AgentWorkerError {
  error: string;
  reason?: 'exited' | 'garbage' | 'timeout';
  exit_code?: number;
  /** The worker was killed for memory (the kernel's OOM killer, or the agent's guard under gVisor). */
  oom_killed?: boolean;
  line?: string;
  stderr?: string;
}

/** How long past a call's own time limit the client waits for the agent's answer by default. */
const WORKER_CALL_SLACK_MS = 30_000;

function workerPath(key: string): string {
  return `/v1/workers/${encodeURIComponent(key)}`;
}

/** A 404 where the route must exist: the sandbox's agent predates workers. */
async function olderAgent(response: IncomingMessage): Promise<ServiceError> {
  response.resume();
  return new ServiceError('UNSUPPORTED', 'persistent workers in a sandbox whose agent predates them (made by an older sandboxd): recreate the sandbox');
}

async function errorBody(response: IncomingMessage): Promise<AgentWorkerError> {
  return parseError(await collect(response), response.statusCode);
}

function parseError(body: Buffer, status: number | undefined): AgentWorkerError {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as AgentWorkerError;
    if (typeof parsed.error === 'string') return parsed;
  } catch {
    // The status alone says enough.
  }
  return { error: `HTTP ${status}` };
}

/** Maps the agent's refusal of a worker request to a service error. */
function workerError(status: number | undefined, key: string, answer: AgentWorkerError): ServiceError {
  const stderr = answer.stderr ?? '';
  switch (status) {
    case 400:
      return badRequest(answer.error);
    case 404:
      return notFound(`worker '${key}' is not running`);
    case 413:
      return new ServiceError('PAYLOAD_TOO_LARGE', answer.error);
    case 429:
      return new ServiceError('LIMIT_REACHED', answer.error);
    case 504:
      return new ServiceError('TIMEOUT', `${answer.error}; the worker was stopped`, { details: { stderr } });
    case 502:
      if (answer.reason === 'garbage') return new WorkerFailed(`${answer.error}; the worker was stopped`, { reason: 'garbage', line: answer.line ?? '', stderr });
      return new WorkerFailed(answer.error, {
        reason: 'exited',
        ...(answer.exit_code === undefined ? {} : { exit_code: answer.exit_code }),
        ...(answer.oom_killed === true ? { oom_killed: true } : {}),
        stderr,
      });
    default:
      return new ServiceError('INTERNAL', `the sandbox agent failed: ${answer.error}`);
  }
}

/** A detached command as the agent reports it. */
export interface AgentDetached {
  id: string;
  pid: number;
  argv: string[];
  status: 'running' | 'completed' | 'failed' | 'killed';
  exit_code: number | null;
  started_at: string;
  finished_at?: string;
}

async function collect(stream: AsyncIterable<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks);
}

function filesPath(path: string): string {
  return `/v1/files?path=${encodeURIComponent(path)}`;
}

function archivePath(path: string): string {
  return `/v1/archive?path=${encodeURIComponent(path)}`;
}

/** An archive's refusal; a plain 404 is an agent without archives (older than the sandboxd that asks). */
async function archiveError(response: IncomingMessage, path: string): Promise<ServiceError> {
  if (response.statusCode === 404 && !String(response.headers['content-type']).includes('json')) {
    response.resume();
    return new ServiceError('UNSUPPORTED', 'directory archives in a sandbox whose agent predates them (made by an older sandboxd): recreate the sandbox');
  }
  return agentError(response, path, `directory '${path}'`);
}

/** Reads exec frames until the exit frame; an abort ends the request, and the agent kills the command. */
function readFrames(response: IncomingMessage, request: FrameExec): Promise<ExecOutcome> {
  return new Promise((resolve, reject) => {
    let pending: Buffer = Buffer.alloc(0);
    let outcome: ExecOutcome | undefined;
    const aborted = () => ({ exit_code: 137, timed_out: false, aborted: true });
    // A frame that does not parse ends the exec as a cut stream: an error thrown in a `data`
    // listener would escape every handler.
    response.on('data', (chunk: Buffer) => {
      try {
        readChunk(chunk);
      } catch (err) {
        response.destroy();
        reject(cut(`malformed frame: ${(err as Error).message}`));
      }
    });
    const readChunk = (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (pending.length >= FRAME_HEADER) {
        const size = pending.readUInt32BE(1);
        if (pending.length < FRAME_HEADER + size) break;
        const type = pending[0];
        const payload = pending.subarray(FRAME_HEADER, FRAME_HEADER + size);
        pending = pending.subarray(FRAME_HEADER + size);
        if (type === FRAME.stdout || type === FRAME.stderr) {
          if (payload.length > 0) request.onFrame(type === FRAME.stdout ? 'stdout' : 'stderr', payload);
        } else if (type === FRAME.exit) {
          const exit = JSON.parse(payload.toString('utf8')) as { exit_code: number; timed_out: boolean; oom_killed?: boolean };
          outcome = { exit_code: exit.exit_code, timed_out: exit.timed_out, aborted: false, ...(exit.oom_killed ? { oom_killed: true } : {}) };
        } else if (type === FRAME.error) {
          const { error } = JSON.parse(payload.toString('utf8')) as { error: string };
          request.onFrame('stderr', Buffer.from(`sandboxd-agent: ${error}\n`));
        }
      }
    };
    // A stream cut before the exit frame means the agent (PID 1) died or the sandbox stopped.
    const cut = (reason: string) =>
      new ServiceError('INTERNAL', `the sandbox agent closed the exec stream before the command ended (${reason}): the sandbox may have stopped or restarted`);
    response.once('end', () => {
      if (outcome) resolve(outcome);
      else if (request.signal?.aborted) resolve(aborted());
      else reject(cut('no exit status'));
    });
    response.on('error', (err) => (request.signal?.aborted ? resolve(aborted()) : reject(cut(err.message))));
    response.once('aborted', () => request.signal?.aborted && resolve(aborted()));
  });
}

/** A refused baseline or reset: CONFLICT with the agent's reason and what it found left over. */
async function resetError(response: IncomingMessage, fallback: string): Promise<ServiceError> {
  let answer: { error?: string; leftovers?: string[] } = {};
  try {
    answer = JSON.parse((await collect(response)).toString('utf8')) as typeof answer;
  } catch {
    // The status alone says enough.
  }
  const leftovers = answer.leftovers?.length ? `: ${answer.leftovers.slice(0, 10).join('; ')}` : '';
  return conflict(`${answer.error ?? fallback}${leftovers}`);
}

/** Maps an agent's refusal to a service error; `missing` names what a 404 did not find. */
async function agentError(response: IncomingMessage, path?: string, missing = `file '${path}'`): Promise<ServiceError> {
  let message = `HTTP ${response.statusCode}`;
  try {
    message = (JSON.parse((await collect(response)).toString('utf8')) as { error?: string }).error ?? message;
  } catch {
    // The status alone says enough.
  }
  const subject = path ? `'${path}'` : 'the request';
  switch (response.statusCode) {
    case 404:
      return notFound(`${missing} not found`);
    case 403:
      return forbidden(`permission denied: ${path ?? message}`);
    case 409:
      return conflict(message);
    case 400:
      // The agent's messages name the path already ('/x' is a directory): not said twice.
      return badRequest(path && message.includes(`'${path}'`) ? message : `${subject}: ${message}`);
    default:
      if (/no space left on device/i.test(message)) return noSpace(path);
      return new ServiceError('INTERNAL', `the sandbox agent failed: ${message}`);
  }
}
