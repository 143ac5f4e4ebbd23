import type { ExecOptions } from '../../backends/backend.js';
import type { ExecInput, ExecResultBody } from '../../schemas/exec-schemas.js';
import type { RunInput } from '../../schemas/run-schemas.js';
import type { SandboxRecord } from '../../state/sandbox-repository.js';

/** How a service runs a command: the backend's options, and whether the request passed the gate already. */
export interface CommandOptions extends ExecOptions {
  /** The request passed `ExecService.gate` where it entered (the HTTP policy hook): not checked again. */
  gated?: boolean;
}

/** What a run is doing: its sandbox is being made, it is up, the command runs. */
export type RunStage = 'creating' | 'starting' | 'executing';

/** How a run goes: a command's options, and what the caller hears of its progress. */
export interface RunOptions extends CommandOptions {
  /** The run's sandbox name, once chosen (before anything is made). */
  onStarted?: (sandbox: string) => void;
  /** Each stage, in order. */
  onStage?: (stage: RunStage) => void;
}

/** What other domains use of commands in a sandbox (ExecService implements it). */
export interface ExecApi {
  /** The one check of a command request (sudo while the server refuses it): FORBIDDEN. */
  gate(request: { sudo?: boolean | undefined }): void;
  /** Runs a command in a running sandbox and answers its result. */
  exec(name: string, input: ExecInput, options?: CommandOptions): Promise<ExecResultBody>;
  /** The env of a sandbox's commands: its own, then the server's (the proxy, the LLM gateway). */
  envOf(sandbox: Pick<SandboxRecord, 'uuid' | 'profile' | 'env'> & Partial<Pick<SandboxRecord, 'network'>>): Promise<Record<string, string>>;
  /** The server's variables alone (for processes that take no sandbox env, such as object workers). */
  serverEnvOf(sandbox: Pick<SandboxRecord, 'uuid' | 'profile'> & Partial<Pick<SandboxRecord, 'network'>>): Promise<Record<string, string>>;
}

/** What other domains use of one-shot runs (RunService implements it). */
export interface RunsApi {
  /** Runs one command in a fresh, pristine instance and answers its result. */
  run(input: RunInput, options?: RunOptions): Promise<ExecResultBody>;
}
