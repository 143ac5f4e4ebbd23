import { randomBytes } from 'node:crypto';
import type { Backend, WorkersCapability } from '../../../backends/backend.js';
import { isServiceError, ServiceError } from '../../../errors.js';
import type { ObjectClassRecord, ObjectRecord } from '../../../state/object-repository.js';
import type { Logger } from '../../../telemetry/logger.js';
import type { ServiceContext } from '../../context.js';
import type { SandboxRecord } from '../../../state/sandbox-repository.js';
import { checkedReply, type AlarmChange, type RunnerReply, type Writes } from './call-outcome.js';

export type { AlarmChange, RunnerReply, Writes } from './call-outcome.js';
import { classDir, runnerAsset, versionDir } from './runner-assets.js';
import { textDeeperThan, TOO_DEEP } from '../../../domain/json-depth.js';

/** The labels of an object's managed sandbox. */
export const OBJECT_LABEL = 'sandboxd.object';
export const OBJECT_CLASS_LABEL = 'sandboxd.object.class';

/** Longest a class's `setup` may run in one sandbox. */
const SETUP_TIMEOUT_MS = 600_000;

/**
 * The first uid of the objects bound to a sandbox of someone's: object n of the server runs as
 * uid and gid `OBJECT_UID_BASE + n` there (n: its row's number), so that no object's process can
 * reach another's (its pipes under /proc, its memory, its signals). A managed sandbox holds one
 * object: it runs as the sandbox's user.
 */
export const OBJECT_UID_BASE = 200_000;

/** Who a call runs as, and the worker that serves only its object. */
export interface CallIdentity {
  /** The object's id: a worker serves one object (and one class version), never another. */
  object: string;
  /** The object's own uid (a bound sandbox), or null: the sandbox's user (a managed sandbox). */
  uid: number | null;
}

/** One request to the runner, without its nonce and module (the invoker adds them). */
export interface RunnerRequest {
  method: string;
  args: unknown;
  storage: Record<string, unknown>;
  alarm: { fire_at: string; method: string; args: unknown } | null;
  object: { id: string; class: string; object_id: string };
  now: string;
  call_id: string;
}

/** An object's sandbox, ready for calls of one class version. */
export interface Prepared {
  backend_id: string;
  /** The server's variables for the sandbox's processes (the LLM gateway's); stable per sandbox. */
  env: Record<string, string>;
  /** Milliseconds spent starting or making the sandbox; undefined when it ran already. */
  woke_ms?: number;
}

export interface Invoked {
  reply: RunnerReply;
  /** What the method printed (stderr), the last 64 KiB. */
  logs: string;
  /** A worker was started for this call (the interpreter's start-up was paid). */
  worker_started: boolean;
}

/**
 * Runs methods of durable objects inside their sandboxes: wakes (starts or makes) the sandbox,
 * writes the runner and the class version's module there through the backend, runs `setup`
 * once per sandbox and version, and sends each call to a persistent worker (where the backend
 * has the `workers` capability) or to a runner process of its own.
 */
export class ObjectRuntime {
  private readonly exec: ServiceContext['exec'];
  private readonly backend: Backend;
  private readonly sandboxes: ServiceContext['sandboxes'];
  private readonly logger: Logger;
  /** `<backend id>/<class>/<version>` of the sandboxes known to hold a class version's files. */
  private readonly installed = new Set<string>();
  /** `<backend id>/<worker key>` of the workers known to run. */
  private readonly workers = new Set<string>();

  constructor(ctx: Pick<ServiceContext, 'backend' | 'sandboxes' | 'logger' | 'exec'>) {
    this.exec = ctx.exec;
    this.backend = ctx.backend;
    this.sandboxes = ctx.sandboxes;
    this.logger = ctx.logger;
  }

  /**
   * Makes sure the object's sandbox runs with the class version's files: a managed sandbox is
   * made when missing, made again when its image, profile or limits differ from the class's,
   * and started when stopped; a bound sandbox must run (CONFLICT with a hint otherwise).
   * `woke_ms` is set when the sandbox was made or started (a cold start).
   */
  async prepare(object: ObjectRecord, klass: ObjectClassRecord): Promise<Prepared> {
    const started = performance.now();
    let { sandbox, made } = await this.sandboxOf(object, klass);
    if (sandbox.status !== 'running' || !sandbox.backend_id) {
      if (!object.sandbox_managed) this.sandboxes.assertRunning(sandbox);
      await this.sandboxes.start(object.sandbox);
      sandbox = await this.sandboxes.require(object.sandbox);
      this.forget(sandbox.backend_id ?? '');
      made = true;
    }
    const running = this.sandboxes.assertRunning(sandbox);
    await this.install(running.backend_id, klass);
    const env = await this.exec.serverEnvOf(sandbox);
    return { backend_id: running.backend_id, env, ...(made ? { woke_ms: Math.round(performance.now() - started) } : {}) };
  }

  /**
   * Sends one request to the runner of the object's class version in the prepared sandbox: to
   * the worker of that object alone (issue 25, item 12: a worker shared by several objects let
   * one object's code read the others' requests, storage included, and answer for them), run
   * as the object's own uid in a sandbox several objects share.
   */
  async invoke(prepared: Prepared, klass: ObjectClassRecord, request: RunnerRequest, timeoutMs: number, identity: CallIdentity): Promise<Invoked> {
    const env = { ...prepared.env, SANDBOXD_OBJECT_CLASS: klass.name };
    const user = identity.uid === null ? {} : { user: `${identity.uid}:${identity.uid}` };
    const asset = runnerAsset(klass.runtime);
    const nonce = randomBytes(12).toString('hex');
    const line = JSON.stringify({ nonce, module: `${versionDir(klass.name, klass.version)}/${asset.module}`, ...request });
    const workers = this.backend.capabilities.workers;
    if (!workers) return this.invokeProcess(prepared.backend_id, klass, nonce, line, timeoutMs, env, user);
    const key = workerKey(klass, identity.object);
    const cacheKey = `${prepared.backend_id}/${key}`;
    let worker_started = false;
    for (let attempt = 0; ; attempt++) {
      if (!this.workers.has(cacheKey)) {
        const request = { command: [...asset.interpreter, asset.path], workdir: classDir(klass.name), env, ...user };
        const worker = await workers.ensureWorker(prepared.backend_id, key, request).catch(async (err: unknown) => {
          // 64 workers run in the sandbox already: the one that started first makes room.
          if (!(isServiceError(err) && err.code === 'LIMIT_REACHED')) throw err;
          await this.stopOldestWorker(prepared.backend_id, workers);
          return workers.ensureWorker(prepared.backend_id, key, request);
        });
        worker_started ||= worker.started;
        this.workers.add(cacheKey);
        if (worker.started) await this.stopOlderWorkers(prepared.backend_id, workers, klass, identity.object, key);
      }
      try {
        const reply = await workers.callWorker(prepared.backend_id, key, { nonce, line, timeout_ms: timeoutMs });
        return { reply: parseReply(reply.line, nonce), logs: reply.stderr, worker_started };
      } catch (err) {
        this.workers.delete(cacheKey);
        // Gone between two calls (a restart, a reset): nothing ran; start it again once.
        if (attempt === 0 && isServiceError(err) && err.code === 'NOT_FOUND') {
          this.forget(prepared.backend_id);
          await this.install(prepared.backend_id, klass);
          continue;
        }
        throw err;
      }
    }
  }

  /** Forgets what is known of a sandbox's files and workers (it was started, stopped or removed). */
  forget(backendId: string): void {
    for (const set of [this.installed, this.workers]) {
      for (const key of set) if (key.startsWith(`${backendId}/`)) set.delete(key);
    }
  }

  /** Stops the object's workers of the class's other versions in a sandbox (its calls moved to a new version), and a worker shared by a class version's objects (as made before). */
  private async stopOlderWorkers(backendId: string, workers: WorkersCapability, klass: ObjectClassRecord, object: string, current: string): Promise<void> {
    const prefix = `obj.${klass.name}.v`;
    const shared = new RegExp(`^obj\\.${klass.name.replaceAll('.', '\\.')}\\.v\\d+$`);
    for (const worker of await workers.listWorkers(backendId)) {
      const older = worker.key.startsWith(prefix) && worker.key.endsWith(`.${object}`) && worker.key !== current;
      if (older || shared.test(worker.key)) await workers.stopWorker(backendId, worker.key);
    }
  }

  /** Stops the object worker that started first in a sandbox (all its slots are taken). */
  private async stopOldestWorker(backendId: string, workers: WorkersCapability): Promise<void> {
    const [oldest] = (await workers.listWorkers(backendId)).filter((worker) => worker.key.startsWith('obj.')).sort((a, b) => a.started_at.localeCompare(b.started_at));
    if (!oldest) return;
    await workers.stopWorker(backendId, oldest.key);
    this.workers.delete(`${backendId}/${oldest.key}`);
  }

  /** Stops the object's workers in a sandbox (it is deleted); a sandbox that does not run has none. */
  async retire(backendId: string, object: string): Promise<void> {
    const workers = this.backend.capabilities.workers;
    if (!workers) return;
    for (const worker of await workers.listWorkers(backendId).catch(() => [])) {
      if (worker.key.startsWith('obj.') && worker.key.endsWith(`.${object}`)) {
        await workers.stopWorker(backendId, worker.key).catch(() => undefined);
        this.workers.delete(`${backendId}/${worker.key}`);
      }
    }
  }

  /** A call in a process of its own: the runner gets the one request on stdin and exits. */
  private async invokeProcess(
    backendId: string,
    klass: ObjectClassRecord,
    nonce: string,
    line: string,
    timeoutMs: number,
    env: Record<string, string>,
    user: { user?: string },
  ): Promise<Invoked> {
    const asset = runnerAsset(klass.runtime);
    const result = await this.backend.exec(backendId, {
      command: [...asset.interpreter, asset.path],
      workdir: classDir(klass.name),
      env,
      ...user,
      stdin: Buffer.from(`${line}\n`),
      timeout_ms: timeoutMs,
      max_output_bytes: 64 * 1024 * 1024,
    });
    if (result.timed_out) throw new ServiceError('TIMEOUT', `did not finish within ${timeoutMs} ms`);
    const answer = result.stdout.split('\n').find((candidate) => candidate.startsWith(`${nonce} `));
    if (!answer) {
      throw new ServiceError('METHOD_FAILED', `the runner exited with code ${result.exit_code} without an answer`, {
        details: { reason: 'exited', exit_code: result.exit_code, ...(result.oom_killed ? { oom_killed: true } : {}), stderr: result.stderr.slice(-16_384) },
      });
    }
    return { reply: parseReply(answer, nonce), logs: result.stderr.slice(-65_536), worker_started: false };
  }

  /** The object's sandbox record; a managed one is made (`made`) when missing or unlike its class. */
  private async sandboxOf(object: ObjectRecord, klass: ObjectClassRecord): Promise<{ sandbox: SandboxRecord; made: boolean }> {
    let sandbox: SandboxRecord | undefined;
    try {
      sandbox = await this.sandboxes.require(object.sandbox);
    } catch (err) {
      if (!(isServiceError(err) && err.code === 'NOT_FOUND') || !object.sandbox_managed) throw err;
    }
    if (sandbox && object.sandbox_managed && !fits(sandbox, klass)) {
      this.logger.info({ object: object.id, sandbox: object.sandbox }, 'the class changed its sandbox settings: making the sandbox again');
      if (sandbox.backend_id) this.forget(sandbox.backend_id);
      await this.sandboxes.remove(object.sandbox);
      sandbox = undefined;
    }
    if (sandbox) return { sandbox, made: false };
    await this.sandboxes.create(
      {
        name: object.sandbox,
        image: klass.image,
        profile: klass.profile,
        vcpus: klass.vcpus,
        memory_mb: klass.memory_mb,
        labels: { [OBJECT_LABEL]: object.id, [OBJECT_CLASS_LABEL]: object.class },
        description: `durable object ${object.class}/${object.object_id}`,
      },
      { internal: true },
    );
    const created = await this.sandboxes.require(object.sandbox);
    if (created.backend_id) this.forget(created.backend_id);
    return { sandbox: created, made: true };
  }

  /** Writes the runner and the class version's module (and runs setup) unless the sandbox has them. */
  private async install(backendId: string, klass: ObjectClassRecord): Promise<void> {
    const key = `${backendId}/${klass.name}/${klass.version}`;
    if (this.installed.has(key)) return;
    const asset = runnerAsset(klass.runtime);
    const dir = versionDir(klass.name, klass.version);
    const marker = `${dir}/.installed`;
    const expected = `${klass.sha256} ${asset.path}\n`;
    const present = await this.backend.readFile(backendId, marker).then(
      (bytes) => bytes.toString('utf8') === expected,
      () => false,
    );
    if (!present) {
      await this.backend.writeFile(backendId, asset.path, Buffer.from(asset.text));
      await this.backend.writeFile(backendId, `${dir}/${asset.module}`, Buffer.from(klass.source));
      if (klass.setup) await this.runSetup(backendId, klass, klass.setup);
      await this.backend.writeFile(backendId, marker, Buffer.from(expected));
    }
    this.installed.add(key);
  }

  private async runSetup(backendId: string, klass: ObjectClassRecord, setup: string[]): Promise<void> {
    const result = await this.backend.exec(backendId, { command: setup, workdir: classDir(klass.name), timeout_ms: SETUP_TIMEOUT_MS });
    if (result.exit_code !== 0) {
      throw new ServiceError('METHOD_FAILED', `setup of class '${klass.name}' (${setup.join(' ')}) exited with code ${result.exit_code}`, {
        details: { exit_code: result.exit_code, output: result.output.slice(-16_384) },
      });
    }
  }
}

/** The key of the worker of one object and class version: `obj.<class>.v<version>.<object id>`. */
export const workerKey = (klass: Pick<ObjectClassRecord, 'name' | 'version'>, object: string): string => `obj.${klass.name}.v${klass.version}.${object}`;

/** Whether a managed sandbox was made with the class's current settings. */
function fits(sandbox: SandboxRecord, klass: ObjectClassRecord): boolean {
  return sandbox.image === klass.image && sandbox.profile === klass.profile && sandbox.vcpus === klass.vcpus && sandbox.memory_mb === klass.memory_mb;
}

/** The runner's answer line, `<nonce> <json>`, checked; METHOD_FAILED for anything else. */
function parseReply(line: string, nonce: string): RunnerReply {
  let reply: unknown;
  // The answer (result and storage writes) comes from the object's code: one nested past the
  // limit fails the call here, before any walk of it could overflow the stack.
  if (textDeeperThan(line)) throw new ServiceError('METHOD_FAILED', `the method's answer is ${TOO_DEEP}`, { details: { reason: 'too_deep', stderr: '' } });
  try {
    if (line.startsWith(`${nonce} `)) reply = JSON.parse(line.slice(nonce.length + 1));
  } catch {
    reply = undefined;
  }
  return checkedReply(reply);
}
