import type { Readable } from 'node:stream';

/** Receives each output frame of a command as it arrives. */
export type FrameHandler = (stream: 'stdout' | 'stderr', data: Buffer) => void;

/**
 * One command as a backend's lower layers run it (the sandbox agent, or an engine's own exec):
 * argv, environment as `KEY=value` strings, and every output frame handed on as it arrives.
 */
export interface RawExec {
  cmd: string[];
  /** undefined: the image's default user. */
  user?: string;
  env?: string[];
  workdir?: string;
  /** Written to the command's stdin, which is then closed so that it sees EOF. */
  stdin?: Buffer | Readable;
  timeoutMs?: number;
  /** Leave running what the command started in the background (see ExecRequest.keep_background). */
  keepBackground?: boolean;
  signal?: AbortSignal;
  onFrame: FrameHandler;
}

/** How a command ended; `aborted` when the caller's signal ended it. */
export interface RawExecOutcome {
  exitCode: number;
  timedOut: boolean;
  aborted: boolean;
  /** The kernel's OOM killer ended it (where the lower layer can tell). */
  oomKilled?: boolean;
}
