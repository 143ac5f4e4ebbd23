import type { Backend, ExecOptions, ExecRequest } from '../../backends/backend.js';
import type { CommandOptions, ExecApi } from './api.js';

export type { CommandOptions } from './api.js';
import { forbidden, isServiceError } from '../../errors.js';
import { execResult, type ExecInput, type ExecResultBody } from '../../schemas/exec-schemas.js';
import { view } from '../../schemas/view.js';
import type { AuditApi } from '../events/api.js';
import type { SandboxesApi } from '../sandboxes/api.js';
import type { ServiceContext } from '../context.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';
import type { Config } from '../../config/config-schema.js';

/** The variables the server adds to every command of a sandbox (the LLM gateway's), under the sandbox's own. */
export type SandboxEnvSource = (sandbox: Pick<SandboxRecord, 'uuid' | 'profile'> & Partial<Pick<SandboxRecord, 'network'>>) => Promise<Record<string, string>>;

export const DEFAULT_EXEC_TIMEOUT_MS = 300_000;


/** Runs commands in persistent sandboxes. */
export class ExecService implements ExecApi {
  private readonly sandboxes: SandboxesApi;
  private readonly backend: Backend;
  private readonly audit: AuditApi;
  private readonly allowSudoExec: boolean;
  private readonly serverEnv: SandboxEnvSource;

  constructor(ctx: Pick<ServiceContext, 'sandboxes' | 'backend' | 'audit'> & { config: Pick<Config, 'allowSudoExec'> } & { serverEnv?: SandboxEnvSource }) {
    this.serverEnv = ctx.serverEnv ?? (async () => ({}));
    this.sandboxes = ctx.sandboxes;
    this.backend = ctx.backend;
    this.audit = ctx.audit;
    this.allowSudoExec = ctx.config.allowSudoExec;
  }

  /**
   * The one service gate of a command request (exec, run, detached, pty): refuses sudo while it
   * is disabled (the schema refused the rest, such as a relative workdir, at the edge). It runs
   * once per request, where the request enters: the HTTP policy hook (before the policy, so that
   * rules only narrow it; the route then passes `gated`), a schedule's create and fire, an
   * orchestration's activity, or the service function called without `gated`.
   */
  gate(request: { sudo?: boolean | undefined }): void {
    if (request.sudo && !this.allowSudoExec) {
      throw forbidden(
        'sudo exec is disabled: start the server with --allow-sudo-exec (or SERVICE_ALLOW_SUDO_EXEC=true, or allow_sudo_exec = true in the [api] section of the config file)',
      );
    }
  }

  /**
   * The env of a sandbox's commands: the server's variables (the LLM gateway's base URLs and
   * placeholder keys), under the sandbox's own env, under each request's.
   */
  async envOf(sandbox: Pick<SandboxRecord, 'uuid' | 'profile' | 'env'> & Partial<Pick<SandboxRecord, 'network'>>): Promise<Record<string, string>> {
    return { ...(await this.serverEnv(sandbox)), ...sandbox.env };
  }

  /** The server's variables alone (for processes that take no sandbox env, such as object workers). */
  serverEnvOf(sandbox: Pick<SandboxRecord, 'uuid' | 'profile'> & Partial<Pick<SandboxRecord, 'network'>>): Promise<Record<string, string>> {
    return this.serverEnv(sandbox);
  }

  /**
   * Runs one command and waits for it. A non-zero exit is a normal result; a timeout
   * kills the process tree and returns the partial output with exit code 124. The sandbox's
   * env is under the request's (a sandbox made from a pool instance has it from here alone).
   */
  async exec(name: string, input: ExecInput, { gated, ...options }: CommandOptions = {}): Promise<ExecResultBody> {
    const sandbox = await this.sandboxes.require(name);
    if (!gated) this.gate(input);
    const running = this.sandboxes.assertRunning(sandbox);
    let result;
    try {
      result = await this.backend.exec(running.backend_id, backendRequest(input, await this.envOf(sandbox)), options);
    } catch (err) {
      if (isServiceError(err) && err.code === 'CONFLICT') {
        // The container stopped behind the service's back: say so the same way as for a stopped sandbox.
        await this.sandboxes.markStopped(sandbox);
        this.sandboxes.assertRunning({ ...sandbox, status: 'stopped' });
      }
      throw err;
    }
    await this.sandboxes.touch(sandbox);
    await this.audit.record('command_executed', sandbox, {
      command: input.command,
      exit_code: result.exit_code,
      duration_ms: result.duration_ms,
      timed_out: result.timed_out,
      ...(input.sudo ? { sudo: true } : {}),
    });
    return view(execResult, result);
  }

  /** Runs one command in an instance that is no sandbox (a pool instance of a fast run, whose request the run gated). */
  async execInstance(backendId: string, input: ExecInput, options: ExecOptions = {}): Promise<ExecResultBody> {
    return view(execResult, await this.backend.exec(backendId, backendRequest(input), options));
  }
}

/** The backend's form of an exec request; the sandbox's env lies under the request's. */
export function backendRequest(input: ExecInput, sandboxEnv: Record<string, string> = {}): ExecRequest {
  const env = { ...sandboxEnv, ...input.env };
  return {
    command: input.command,
    ...(input.workdir ? { workdir: input.workdir } : {}),
    ...(Object.keys(env).length > 0 ? { env } : {}),
    ...(input.sudo ? { user: 'root' } : {}),
    ...(input.stdin !== undefined ? { stdin: Buffer.from(input.stdin, 'utf8') } : {}),
    timeout_ms: input.timeout_ms ?? DEFAULT_EXEC_TIMEOUT_MS,
  };
}
