/**
 * The child processes that run host sqlite store SQL off the server's event loop
 * (`--store-workers`, docs/decisions.md "sqlite stores"). Each worker runs one request at a
 * time; requests wait in one queue, and a store's writes run one at a time (so two workers never
 * wait on each other's write lock). A request's time limit counts from its arrival: one that
 * is still queued at its deadline is answered 504 and dropped, one that is running has its
 * worker SIGKILLed (SQLite cannot be interrupted here) and a new worker forked in its place.
 *
 * One store's slow statements never hold the others up: when every worker is busy, a request
 * of a store that has nothing running gets a worker of its own, forked on demand, up to
 * EXTRA_WORKERS_PER_WORKER times the base workers more; such a worker ends after
 * EXTRA_WORKER_IDLE_MS without work. A store with a statement running waits for a free worker.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError } from '../../../../../errors.js';
import { PACKAGE_ROOT } from '../../../../../paths.js';
import type { Logger } from '../../../../../telemetry/logger.js';
import { READY, type WorkerAnswer, type WorkerRequest } from './sqlite-protocol.js';

/** The compiled worker (`npm run build`); the same file whether the server runs from dist/ or tests from src/. */
export const SQLITE_WORKER_MODULE = join(PACKAGE_ROOT, 'dist', 'src', 'services', 'durable', 'stores', 'engines', 'sqlite', 'sqlite-worker.js');

/** A request without its id, which the pool assigns. */
export type PoolRequest = WorkerRequest extends infer R ? (R extends WorkerRequest ? Omit<R, 'id'> : never) : never;

export interface PoolRunOptions {
  timeoutMs: number;
  /** Who the request is for, in messages: `sqlite store 'x'`. */
  label: string;
  /** Requests with the same key run one at a time (a store's writes). */
  exclusive?: string;
}

interface Job {
  id: number;
  request: PoolRequest;
  options: PoolRunOptions;
  timer: NodeJS.Timeout;
  settled: boolean;
  resolve: (answer: WorkerAnswer) => void;
  reject: (err: Error) => void;
}

interface Slot {
  child?: ChildProcess;
  ready?: Promise<void>;
  job?: Job;
  stderr: string;
  /** A worker on demand: it ends when idle, and is not replaced when it dies. */
  extra?: boolean;
  idle?: NodeJS.Timeout;
}

const STDERR_KEPT = 4096;

/** How many workers on demand the pool may add per base worker (`--store-workers`). */
export const EXTRA_WORKERS_PER_WORKER = 3;

/** How long a worker on demand waits for more work before it ends. */
export const EXTRA_WORKER_IDLE_MS = 10_000;

export class SqliteHostPool {
  private readonly slots: Slot[];
  private readonly maxSlots: number;
  private readonly queue: Job[] = [];
  private readonly busyKeys = new Set<string>();
  /** How many requests of each store (its file) run now. */
  private readonly running = new Map<string, number>();
  private nextId = 1;
  private stopped = false;

  constructor(
    size: number,
    private readonly logger: Logger,
    private readonly workerModule: string = SQLITE_WORKER_MODULE,
    private readonly extraIdleMs: number = EXTRA_WORKER_IDLE_MS,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`sqlite store workers: ${size} must be a whole number of at least 1`);
    this.slots = Array.from({ length: size }, () => ({ stderr: '' }));
    this.maxSlots = size * (1 + EXTRA_WORKERS_PER_WORKER);
  }

  /** How many workers the pool has now, base and on demand, started or not. */
  get size(): number {
    return this.slots.length;
  }

  /**
   * Runs one request on a free worker and resolves with its answer (which may be an engine
   * error); rejects TIMEOUT at the deadline, STORE_UNAVAILABLE when its worker died or the pool stopped.
   */
  run(request: PoolRequest, options: PoolRunOptions): Promise<WorkerAnswer> {
    if (this.stopped) return Promise.reject(stoppedError(options.label));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.expire(job), options.timeoutMs);
      const job: Job = { id: this.nextId++, request, options, settled: false, resolve, reject, timer };
      this.queue.push(job);
      this.pump();
    });
  }

  /** Asks every live worker to close a store's connections (after the request it is running). */
  closeFile(file: string): void {
    for (const slot of this.slots) {
      if (slot.child?.connected) slot.child.send({ id: 0, op: 'close', file } satisfies WorkerRequest, () => undefined);
    }
  }

  /** Fails what waits or runs and ends the workers. */
  async shutdown(): Promise<void> {
    this.stopped = true;
    for (const job of this.queue.splice(0)) this.settle(job, stoppedError(job.options.label));
    const exits: Promise<void>[] = [];
    for (const slot of this.slots) {
      clearTimeout(slot.idle);
      if (slot.job) this.settle(slot.job, stoppedError(slot.job.options.label));
      const child = slot.child;
      if (child && child.exitCode === null && child.signalCode === null) {
        exits.push(new Promise((resolve) => child.once('exit', () => resolve())));
        child.kill('SIGKILL');
      }
    }
    await Promise.all(exits);
  }

  /**
   * Hands queued jobs, oldest first, to idle workers, keeping a store's writes one at a time;
   * a store with nothing running gets a worker on demand when none is idle.
   */
  private pump(): void {
    for (let index = 0, job = this.queue[0]; job !== undefined; job = this.queue[index]) {
      const slot = job.options.exclusive && this.busyKeys.has(job.options.exclusive) ? undefined : this.slotFor(job);
      if (!slot) {
        index += 1;
        continue;
      }
      this.queue.splice(index, 1);
      clearTimeout(slot.idle);
      slot.job = job;
      if (job.options.exclusive) this.busyKeys.add(job.options.exclusive);
      this.running.set(job.request.file, (this.running.get(job.request.file) ?? 0) + 1);
      this.start(slot, job);
    }
    for (const slot of this.slots) if (slot.extra && !slot.job && !slot.idle) slot.idle = setTimeout(() => this.retire(slot), this.extraIdleMs).unref();
  }

  /** An idle worker for job, else a new worker on demand when its store runs nothing and the pool may grow. */
  private slotFor(job: Job): Slot | undefined {
    const idle = this.slots.find((slot) => !slot.job);
    if (idle) return idle;
    if (this.slots.length >= this.maxSlots || (this.running.get(job.request.file) ?? 0) > 0) return undefined;
    const extra: Slot = { stderr: '', extra: true };
    this.slots.push(extra);
    return extra;
  }

  /** Ends a worker on demand that stayed idle, or one whose worker died or was killed. */
  private retire(slot: Slot): void {
    if (slot.job) return;
    clearTimeout(slot.idle);
    this.slots.splice(this.slots.indexOf(slot), 1);
    const child = slot.child;
    slot.child = undefined;
    slot.ready = undefined;
    child?.kill('SIGKILL');
  }

  private start(slot: Slot, job: Job): void {
    let ready: Promise<void>;
    try {
      ready = slot.ready ?? this.spawn(slot);
    } catch (err) {
      this.finish(slot, job, err as Error);
      return;
    }
    ready.then(
      () => {
        if (job.settled || slot.job !== job) return;
        slot.child!.send({ ...job.request, id: job.id } as WorkerRequest, (err) => {
          if (err) this.logger.warn({ err }, 'sqlite worker: could not send a request');
        });
      },
      (err: Error) => {
        if (slot.job === job) this.finish(slot, job, new ServiceError('STORE_UNAVAILABLE', `${job.options.label}: ${err.message}`));
      },
    );
  }

  private spawn(slot: Slot): Promise<void> {
    if (!existsSync(this.workerModule)) {
      this.logger.error({ module: this.workerModule }, 'sqlite worker module missing');
      throw new ServiceError('INTERNAL', `the sqlite worker ${this.workerModule} is missing: run npm run build`);
    }
    const child = fork(this.workerModule, [], { serialization: 'json', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], execArgv: [] });
    slot.child = child;
    slot.stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (slot.stderr = (slot.stderr + chunk.toString('utf8')).slice(-STDERR_KEPT)));
    let started = false;
    const ready = new Promise<void>((resolve, reject) => {
      child.on('message', (message: WorkerAnswer | typeof READY) => {
        if (message === READY) {
          started = true;
          resolve();
        } else if (slot.child === child && slot.job && message.id === slot.job.id) {
          this.finish(slot, slot.job, message);
        }
      });
      child.once('error', (err) => this.logger.warn({ err, pid: child.pid }, 'sqlite worker error'));
      child.once('exit', (code, signal) => {
        if (!started) reject(new Error(`the sqlite worker could not start (exit ${signal ?? code}): ${slot.stderr.trim() || 'no output'}`));
        this.exited(slot, child, started, code, signal);
      });
    });
    // A rejection is handled by the job that waits on it; later jobs fork again.
    ready.catch(() => undefined);
    slot.ready = ready;
    return ready;
  }

  private exited(slot: Slot, child: ChildProcess, started: boolean, code: number | null, signal: NodeJS.Signals | null): void {
    if (slot.child !== child) return;
    slot.child = undefined;
    slot.ready = undefined;
    const job = slot.job;
    if (job && !job.settled && started) {
      this.logger.warn({ pid: child.pid, code, signal, stderr: slot.stderr }, 'sqlite worker exited during a request');
      this.finish(
        slot,
        job,
        new ServiceError(
          'STORE_UNAVAILABLE',
          `${job.options.label}: the worker process running the statement exited (${signal ?? `code ${code}`}); a new one was started, the statement's outcome is unknown`,
        ),
      );
    }
    if (started) this.respawn(slot);
  }

  /** Forks a replacement now (unless a new job already did), so the next request does not wait for it; a worker on demand goes instead. */
  private respawn(slot: Slot): void {
    if (slot.extra && !slot.job) return this.retire(slot);
    if (slot.child || this.stopped) return;
    try {
      this.spawn(slot);
    } catch {
      // Logged by spawn; the next request reports it.
    }
  }

  private expire(job: Job): void {
    if (job.settled) return;
    const error = new ServiceError('TIMEOUT', `${job.options.label}: the statement did not finish within ${job.options.timeoutMs} ms and was stopped`);
    const queued = this.queue.indexOf(job);
    if (queued !== -1) {
      this.queue.splice(queued, 1);
      this.settle(job, error);
      return;
    }
    const slot = this.slots.find((candidate) => candidate.job === job);
    if (!slot) return;
    const child = slot.child;
    this.logger.info({ pid: child?.pid, timeout_ms: job.options.timeoutMs }, 'sqlite worker killed at a statement deadline');
    // Detach it first: its exit is expected, and the slot's next job needs a new worker.
    slot.child = undefined;
    slot.ready = undefined;
    child?.kill('SIGKILL');
    this.finish(slot, job, error);
    this.respawn(slot);
  }

  /** Ends a slot's job and gives the slot the next one. */
  private finish(slot: Slot, job: Job, outcome: WorkerAnswer | Error): void {
    if (slot.job === job) {
      slot.job = undefined;
      if (job.options.exclusive) this.busyKeys.delete(job.options.exclusive);
      const left = (this.running.get(job.request.file) ?? 1) - 1;
      if (left > 0) this.running.set(job.request.file, left);
      else this.running.delete(job.request.file);
    }
    this.settle(job, outcome);
    if (!this.stopped) this.pump();
  }

  private settle(job: Job, outcome: WorkerAnswer | Error): void {
    if (job.settled) return;
    job.settled = true;
    clearTimeout(job.timer);
    if (outcome instanceof Error) job.reject(outcome);
    else job.resolve(outcome);
  }
}

const stoppedError = (label: string) => new ServiceError('STORE_UNAVAILABLE', `${label}: the server is shutting down`);
