import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const CLI = resolve(import.meta.dirname, '../../dist/src/cli/main.js');

export interface ServerProcess {
  child: ChildProcess;
  url: string;
  stderr: () => string;
  /** SIGKILL, and wait for the exit. */
  kill9(): Promise<void>;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
}

/** Runs the CLI to completion, with `input` on its standard input (an empty one without it); for commands that are expected to exit. */
export function runCli(args: string[], env: NodeJS.ProcessEnv = {}, input?: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...env }, stdio: 'pipe' });
    // A CLI that exits without reading its input closes the pipe: nothing to report.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('exit', (code) => resolveRun({ code, stdout, stderr }));
  });
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolveExit) => (child.exitCode !== null || child.signalCode ? resolveExit() : child.once('exit', () => resolveExit())));

/** Starts `sandboxd serve` on a free port and waits until it writes server.json. */
export async function startServer(dataDir: string, args: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<ServerProcess> {
  const serverFile = join(dataDir, 'server.json');
  const child = spawn(process.execPath, [CLI, 'serve', '--data-dir', dataDir, '--port', '0', ...args], {
    env: { ...process.env, SERVICE_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c) => (stderr += c));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (existsSync(serverFile)) {
      const info = readServerFile(serverFile);
      if (info && info.pid === child.pid) {
        return {
          child,
          url: info.url,
          stderr: () => stderr,
          async kill9() {
            child.kill('SIGKILL');
            await exited(child);
          },
          async stop() {
            child.kill('SIGTERM');
            await exited(child);
          },
        };
      }
    }
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${stderr}`);
    if (Date.now() > deadline) {
      // An untracked server would outlive the test run.
      child.kill('SIGKILL');
      throw new Error(`server did not start: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** server.json, or undefined while it is being (re)written: a killed server's file may be read half-made. */
function readServerFile(path: string): { url: string; pid: number } | undefined {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as { url: string; pid: number };
  } catch {
    return undefined;
  }
}
