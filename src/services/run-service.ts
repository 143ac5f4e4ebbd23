import { randomBytes } from 'node:crypto';
import type { ExecOptions } from '../backends/backend.js';
import type { ExecResultBody } from '../schemas/exec-schemas.js';
import type { RunInput } from '../schemas/run-schemas.js';
import type { Logger } from '../telemetry/logger.js';
import type { ExecService } from './exec-service.js';
import type { SandboxService } from './sandbox-service.js';

/** Label that marks the short-lived sandbox of a one-shot run. */
const RUN_LABEL = 'sandboxd.run';

/**
 * One-shot runs: a fresh sandbox is created, runs one command and is removed, whatever the
 * command's outcome. Nothing leaks from one run to the next.
 */
export class RunService {
  constructor(
    private readonly sandboxes: SandboxService,
    private readonly exec: ExecService,
    private readonly logger: Logger,
  ) {}

  async run(input: RunInput, options: ExecOptions = {}): Promise<ExecResultBody> {
    const { image, profile, ...request } = input;
    // Refuse a request that exec would refuse before paying for a container.
    this.exec.check(request);
    const name = `run-${randomBytes(6).toString('hex')}`;
    await this.sandboxes.create({
      name,
      ...(image ? { image } : {}),
      ...(profile ? { profile } : {}),
      labels: { [RUN_LABEL]: 'true' },
    });
    try {
      return await this.exec.exec(name, request, options);
    } finally {
      await this.sandboxes.remove(name).catch((err: Error) => this.logger.warn({ sandbox: name, err }, 'run sandbox not removed'));
    }
  }
}
