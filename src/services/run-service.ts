import { randomBytes } from 'node:crypto';
import type { ExecOptions } from '../backends/backend.js';
import { detectImage } from '../images/image-detection.js';
import type { ExecResultBody } from '../schemas/exec-schemas.js';
import type { BatchResultItem, RunInput } from '../schemas/run-schemas.js';
import type { Logger } from '../telemetry/logger.js';
import type { ExecService } from './exec-service.js';
import type { SandboxService } from './sandbox-service.js';

/** Label that marks the short-lived sandbox of a one-shot run. */
const RUN_LABEL = 'sandboxd.run';

/** What a run is doing: its sandbox is being made, it is up, the command runs. */
export type RunStage = 'creating' | 'starting' | 'executing';

export interface RunOptions extends ExecOptions {
  /** The run's sandbox name, once chosen (before anything is made). */
  onStarted?: (sandbox: string) => void;
  /** Each stage, in order. */
  onStage?: (stage: RunStage) => void;
}

export interface RunSettings {
  /** Most commands of one batch that run at once. */
  batchConcurrency: number;
  /** program -> image for a run that names no image. */
  imageDetection: Readonly<Record<string, string>>;
}

/**
 * One-shot runs: a fresh sandbox is created, runs one command and is removed, whatever the
 * command's outcome (or a client that went away). Nothing leaks from one run to the next.
 */
export class RunService {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly exec: ExecService,
    private readonly logger: Logger,
    private readonly settings: RunSettings,
  ) {}

  /** Refuses a request that exec would refuse, before anything is paid for. */
  check(input: RunInput): void {
    this.exec.check(input);
  }

  async run(input: RunInput, options: RunOptions = {}): Promise<ExecResultBody> {
    const { image, profile, ...request } = input;
    this.check(input);
    const name = `run-${randomBytes(6).toString('hex')}`;
    const chosen = image ?? detectImage(request.command, this.settings.imageDetection);
    options.onStarted?.(name);
    options.onStage?.('creating');
    await this.sandboxes.create({
      name,
      ...(chosen ? { image: chosen } : {}),
      ...(profile ? { profile } : {}),
      labels: { [RUN_LABEL]: 'true' },
    });
    try {
      options.onStage?.('starting');
      options.onStage?.('executing');
      return await this.exec.exec(name, request, options);
    } finally {
      await this.sandboxes.remove(name).catch((err: Error) => this.logger.warn({ sandbox: name, err }, 'run sandbox not removed'));
    }
  }

  /**
   * Runs each command in its own sandbox, at most `batchConcurrency` at once; results keep the
   * input order, and a command that cannot run fails alone (`error` says why).
   */
  async batch(inputs: RunInput[], signal?: AbortSignal): Promise<BatchResultItem[]> {
    const results: BatchResultItem[] = new Array(inputs.length);
    let next = 0;
    const worker = async () => {
      while (next < inputs.length) {
        const index = next++;
        try {
          const result = await this.run(inputs[index]!, signal ? { signal } : {});
          results[index] = { output: result.output, error: null, exit_code: result.exit_code };
        } catch (err) {
          results[index] = { output: '', error: (err as Error).message, exit_code: null };
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.settings.batchConcurrency, inputs.length) }, worker));
    return results;
  }
}
