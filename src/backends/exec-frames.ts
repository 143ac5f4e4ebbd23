import type { Readable } from 'node:stream';
import type { ExecRequest, ExecResult } from './types.js';

/** Receives each output frame of a command as it arrives. */
export type FrameHandler = (stream: 'stdout' | 'stderr', data: Buffer) => void;

/**
 * One command as a backend's lower layers run it (the sandbox agent, or an engine's own exec):
 * the program's exec request, spelled the same, with stdin as bytes or a stream, no output cap
 * (every output frame goes to `onFrame` as it arrives) and no time limit when `timeout_ms` is
 * absent. Each lower layer converts it once to its own wire (the agent's JSON, the Engine API's).
 */
export interface FrameExec extends Omit<ExecRequest, 'stdin' | 'timeout_ms' | 'max_output_bytes'> {
  /** Written to the command's stdin, which is then closed so that it sees EOF. */
  stdin?: Buffer | Readable;
  timeout_ms?: number;
  signal?: AbortSignal;
  onFrame: FrameHandler;
}

/** How a command ended, in ExecResult's words; `aborted` when the caller's signal ended it. */
export interface ExecOutcome extends Pick<ExecResult, 'exit_code' | 'timed_out'> {
  aborted: boolean;
  /** The kernel's OOM killer ended it (where the lower layer can tell). */
  oom_killed?: boolean;
}

/** `NAME=value` strings, as the Engine API and the agent take an environment. */
export const envList = (env: Record<string, string> | undefined): string[] => Object.entries(env ?? {}).map(([name, value]) => `${name}=${value}`);
