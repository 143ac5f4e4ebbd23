import { randomBytes } from 'node:crypto';
import { DEFAULT_IMAGE_DETECTION, detectImage } from '../../images/image-detection.js';
import { isServiceError } from '../../errors.js';
import type { ExecInput, ExecResultBody } from '../../schemas/exec-schemas.js';
import type { BatchResultItem, RunInput } from '../../schemas/run-schemas.js';
import type { Logger } from '../../telemetry/logger.js';
import type { ExecService } from './exec-service.js';
import type { RunOptions, RunsApi, RunStage } from './api.js';

export type { RunOptions, RunStage } from './api.js';
import { DEFAULT_PROFILE } from '../../domain/sandbox-defaults.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import type { PoolKey, PooledInstance, TakenInstance } from '../pools/index.js';
import type { RunPoolApi, WarmPoolApi } from '../pools/api.js';
import type { ServiceContext } from '../context.js';
import type { Config, ConfigSection } from '../../config/config-schema.js';

/** Label that marks the short-lived sandbox of a one-shot run. */
const RUN_LABEL = 'sandboxd.run';



export interface RunSettings {
  /** Most commands of one batch that run at once. */
  batchConcurrency: number;
  /** program -> image for a run that names no image. */
  imageDetection: Readonly<Record<string, string>>;
  /** The image of a run whose command the table does not know. */
  defaultImage: string;
}

/** How often a fast run takes another pool instance when the one it took turns out gone. */
const POOL_ATTEMPTS = 3;

/**
 * One-shot runs. A fast run (the default) takes a pristine instance and runs one command in it.
 * Where the backend can reset an instance (`reuse`), the instance comes from the run pool and
 * goes back to it, reset and checked, after the run (an instance whose reset fails is destroyed);
 * elsewhere it comes from the warm pool and is destroyed after its one run. `fast: false`
 * creates a sandbox, runs the command and removes the sandbox. Whatever the command's outcome
 * (or a client that went away), nothing leaks from one run to the next.
 */
export class RunService implements RunsApi {
  private readonly sandboxes: SandboxesApi;
  private readonly exec: ExecService;
  private readonly pool: WarmPoolApi;
  private readonly runPool: RunPoolApi;
  private readonly logger: Logger;
  private readonly settings: RunSettings;

  constructor(ctx: Pick<ServiceContext, 'sandboxes' | 'pool' | 'runPool' | 'logger'> & { exec: ExecService } & { config: ConfigSection<'runs'> & Pick<Config, 'defaultImage'> }) {
    this.sandboxes = ctx.sandboxes;
    this.exec = ctx.exec;
    this.pool = ctx.pool;
    this.runPool = ctx.runPool;
    this.logger = ctx.logger;
    this.settings = {
      batchConcurrency: ctx.config.batchConcurrency,
      imageDetection: { ...DEFAULT_IMAGE_DETECTION, ...ctx.config.imageDetection },
      defaultImage: ctx.config.defaultImage,
    };
  }

  /** Runs one command in a fresh sandbox; the request is gated (unless `gated`) before anything is paid for. */
  async run(input: RunInput, { gated, ...options }: RunOptions = {}): Promise<ExecResultBody> {
    const { image, profile, fast, ...request } = input;
    if (!gated) this.exec.gate(input);
    const key: PoolKey = {
      image: image ?? detectImage(request.command, this.settings.imageDetection) ?? this.settings.defaultImage,
      profile: profile ?? DEFAULT_PROFILE,
    };
    return fast === false ? this.freshRun(key, request, options) : this.pooledRun(key, request, options);
  }

  /** A pool instance (reset after the run, or used once): a warm one skips straight to `executing`. */
  private async pooledRun(key: PoolKey, request: ExecInput, options: RunOptions): Promise<ExecResultBody> {
    const reuse = this.runPool.enabled;
    const take = (): TakenInstance => (reuse ? this.runPool.take(key) : this.pool.take(key));
    const giveBack = (instance: PooledInstance, gone: boolean): void => {
      if (!reuse) this.pool.discard(instance);
      else if (gone) this.runPool.drop(instance);
      else this.runPool.release(instance);
    };
    let taken = take();
    options.onStarted?.(taken.name ?? (await taken.instance).name);
    if (!taken.warm) options.onStage?.('creating');
    for (let attempt = 1; ; attempt++) {
      const instance = await taken.instance;
      if (attempt === 1) {
        if (!taken.warm) options.onStage?.('starting');
        options.onStage?.('executing');
      }
      let gone = false;
      try {
        return await this.exec.execInstance(instance.state.id, request, options);
      } catch (err) {
        gone = isGone(err);
        // A warm instance may have died while it waited (an engine restart): another one runs it.
        if (!taken.warm || attempt >= POOL_ATTEMPTS || !gone) throw err;
        this.logger.warn({ container: instance.state.id, reason: (err as Error).message }, 'pool instance gone; taking another');
        taken = take();
      } finally {
        giveBack(instance, gone);
      }
    }
  }

  /** A sandbox of its own (listed while it runs, label sandboxd.run=true), removed afterwards. */
  private async freshRun(key: PoolKey, request: ExecInput, options: RunOptions): Promise<ExecResultBody> {
    const name = `run-${randomBytes(6).toString('hex')}`;
    options.onStarted?.(name);
    options.onStage?.('creating');
    await this.sandboxes.create({ name, image: key.image, profile: key.profile, labels: { [RUN_LABEL]: 'true' } }, { fromPool: false });
    try {
      options.onStage?.('starting');
      options.onStage?.('executing');
      return await this.exec.exec(name, request, { ...options, gated: true });
    } finally {
      await this.sandboxes.remove(name).catch((err: Error) => this.logger.warn({ sandbox: name, err }, 'run sandbox not removed'));
    }
  }

  /**
   * Runs each command in its own sandbox, at most `batchConcurrency` at once; results keep the
   * input order, and a command that cannot run fails alone (`error` says why). `gated`: each
   * command passed the gate where the batch entered.
   */
  async batch(inputs: RunInput[], signal?: AbortSignal, gated = false): Promise<BatchResultItem[]> {
    const results: BatchResultItem[] = new Array(inputs.length);
    // One iterator shared by the workers: each takes the next input in order.
    const queue = inputs.entries();
    const worker = async () => {
      for (const [index, input] of queue) {
        try {
          const result = await this.run(input, { ...(signal ? { signal } : {}), gated });
          results[index] = {
            output: result.output,
            error: null,
            exit_code: result.exit_code,
            timed_out: result.timed_out,
            truncated: result.truncated,
            ...(result.oom_killed ? { oom_killed: true } : {}),
          };
        } catch (err) {
          results[index] = { output: '', error: (err as Error).message, exit_code: null, timed_out: false, truncated: false };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.settings.batchConcurrency, inputs.length) }, worker));
    return results;
  }
}

/** The engine's answer for an instance that no longer runs or exists. */
const isGone = (err: unknown): boolean => isServiceError(err) && (err.code === 'CONFLICT' || err.code === 'NOT_FOUND');
