import { notFound, ServiceError, WorkerFailed } from '../../errors.js';
import type { WorkerCall, WorkerProcess, WorkerReply, WorkerRequest } from '../types.js';
import { WORKER_LIMITS } from '../worker-rules.js';

/**
 * What a scripted worker does with one call: a string is the line it prints to stdout (the
 * answer when it begins with the call's nonce, garbage otherwise); an object may add stderr,
 * `hang` (no answer: the call times out), or `exit_code` (the worker exits without answering).
 */
export type FakeWorkerAnswer = string | { line?: string; stderr?: string; hang?: boolean; exit_code?: number };

/**
 * Answers the calls of every worker of a FakeBackend. A promise that never settles hangs like
 * `{hang: true}`; a thrown error is the call's failure as it is.
 */
export type FakeWorkerHandler = (key: string, request: WorkerRequest, call: WorkerCall) => FakeWorkerAnswer | Promise<FakeWorkerAnswer>;

/** One worker of a fake instance. */
export interface FakeWorker {
  process: Omit<WorkerProcess, 'started'>;
  request: WorkerRequest;
  /** The request as JSON: the same request finds the same worker. */
  requestKey: string;
  /** The end of the last call queued: calls run one at a time. */
  queue: Promise<unknown>;
  /** Set once the worker is stopped; ends a call in progress as an exit (137). */
  stopped: boolean;
  onStop: (() => void)[];
}

/** The default worker: it answers each line with the line itself, behind the nonce. */
export const echoWorker: FakeWorkerHandler = (_key, _request, call) => (call.line.startsWith(call.nonce) ? call.line : `${call.nonce} ${call.line}`);

/**
 * The workers of the fake backend (its `workers` capability's state and rules), kept per
 * instance in a map the backend owns, so that stopping, starting, resetting or removing the
 * instance ends them.
 */
export class FakeWorkers {
  handler: FakeWorkerHandler = echoWorker;
  /** Every worker started, in order: tests count them to see a worker reused or restarted. */
  readonly starts: { id: string; key: string; request: WorkerRequest }[] = [];
  private nextPid = 5000;

  ensure(workers: Map<string, FakeWorker>, id: string, key: string, request: WorkerRequest): WorkerProcess {
    const requestKey = JSON.stringify([request.command, request.env ?? {}, request.workdir ?? '', request.user ?? '']);
    const existing = workers.get(key);
    if (existing && existing.requestKey === requestKey) return { ...existing.process, started: false };
    if (existing) this.stop(workers, key);
    if (workers.size >= WORKER_LIMITS.max_workers) {
      throw new ServiceError('LIMIT_REACHED', `this sandbox runs ${WORKER_LIMITS.max_workers} workers already: stop one first`);
    }
    const worker: FakeWorker = {
      process: { key, pid: this.nextPid++, command: [...request.command], started_at: new Date().toISOString() },
      request,
      requestKey,
      queue: Promise.resolve(),
      stopped: false,
      onStop: [],
    };
    workers.set(key, worker);
    this.starts.push({ id, key, request });
    return { ...worker.process, started: true };
  }

  /** One call, after the calls queued before it. */
  call(workers: Map<string, FakeWorker>, key: string, call: WorkerCall): Promise<WorkerReply> {
    const worker = workers.get(key);
    if (!worker) return Promise.reject(notFound(`worker '${key}' is not running`));
    const result = worker.queue.then(() => this.run(workers, worker, call));
    worker.queue = result.catch(() => undefined);
    return result;
  }

  /** Stops worker `key` (a call in progress ends as an exit); false when none runs. */
  stop(workers: Map<string, FakeWorker>, key: string): boolean {
    const worker = workers.get(key);
    if (!worker) return false;
    workers.delete(key);
    worker.stopped = true;
    for (const end of worker.onStop.splice(0)) end();
    return true;
  }

  /** Stops every worker of an instance (it stopped, restarted, was reset or removed). */
  stopAll(workers: Map<string, FakeWorker>): void {
    for (const key of [...workers.keys()]) this.stop(workers, key);
  }

  list(workers: Map<string, FakeWorker>): WorkerProcess[] {
    return [...workers.values()].map((worker) => ({ ...worker.process, started: false })).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  private async run(workers: Map<string, FakeWorker>, worker: FakeWorker, call: WorkerCall): Promise<WorkerReply> {
    const { key } = worker.process;
    if (worker.stopped) throw notFound(`worker '${key}' is not running`);
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      Promise.resolve()
        .then(() => this.handler(key, worker.request, call))
        .then((answer) => (typeof answer === 'string' ? { line: answer } : answer))
        // A hanging worker answers nothing: the timeout or a stop ends the call.
        .then((answer) => (answer.hang ? new Promise<never>(() => undefined) : { kind: 'answer' as const, answer })),
      new Promise<{ kind: 'timeout' }>((resolve) => (timer = setTimeout(() => resolve({ kind: 'timeout' }), call.timeout_ms))),
      new Promise<{ kind: 'stopped' }>((resolve) => worker.onStop.push(() => resolve({ kind: 'stopped' }))),
    ]).finally(() => clearTimeout(timer));
    const fail = (error: ServiceError): never => {
      this.stop(workers, key);
      throw error;
    };
    if (outcome.kind === 'stopped') return fail(new WorkerFailed(`worker '${key}' exited during the call (exit code 137)`, { reason: 'exited', exit_code: 137, stderr: '' }));
    if (outcome.kind === 'timeout') {
      return fail(new ServiceError('TIMEOUT', `worker '${key}' did not answer within ${call.timeout_ms}ms; the worker was stopped`, { details: { stderr: '' } }));
    }
    const { answer } = outcome;
    const stderr = (answer.stderr ?? '').slice(-WORKER_LIMITS.stderr_bytes);
    if (answer.exit_code !== undefined) {
      return fail(new WorkerFailed(`worker '${key}' exited during the call (exit code ${answer.exit_code})`, { reason: 'exited', exit_code: answer.exit_code, stderr }));
    }
    const line = (answer.line ?? '').replace(/\n.*$/s, '');
    if (!line.startsWith(call.nonce)) {
      return fail(
        new WorkerFailed(`worker '${key}' printed a line that is not its answer; the worker was stopped`, { reason: 'garbage', line: line.slice(0, WORKER_LIMITS.garbage_bytes), stderr }),
      );
    }
    return { line, stderr, duration_ms: performance.now() - started };
  }
}
