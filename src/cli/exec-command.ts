import { Command } from 'commander';
import { apiPath, type ApiRequest } from '../client/api-client.js';
import type { ExecResultBody } from '../schemas/exec-schemas.js';
import { profile } from '../schemas/common.js';
import { collect } from './cli-config.js';
import { action, type ClientContext } from './client/client-context.js';
import { readStdin } from './client/inputs.js';
import { sseEvents } from '../client/sse-events.js';
import { colours, dim, integer, pairs, printJson } from './client/output.js';

interface CommandOptions {
  workdir?: string;
  env?: string[];
  sudo?: boolean;
  timeout?: string;
  stdin?: boolean;
  image?: string;
  profile?: string;
}

/** Exit code of a command the person interrupted (128 + SIGINT), as shells report it. */
const INTERRUPTED = 130;

/** `sandboxd exec NAME -- CMD...` and `sandboxd run -- CMD...`: streamed, with the command's exit code. */
export function execCommands(ctx: ClientContext): Command[] {
  const exec = new Command('exec')
    .description("run a command in a sandbox; its output streams as it comes, and sandboxd exits with the command's exit code")
    .usage('[options] <name> [--] <command...>')
    .argument('<name>', 'sandbox name')
    .argument('<command...>', "the command and its arguments; sandboxd's options end at its first word")
    .option('--workdir <dir>', "working directory, absolute (default the image's, /workspace)")
    .option('--env <K=V>', 'an environment variable; repeatable', collect)
    .option('--sudo', 'run as root (the server must allow it)')
    .option('--timeout <ms>', 'kill the command after this many milliseconds (default 300000)')
    .option('-i, --stdin', "send this process's standard input (read to its end) to the command")
    .action(
      action(async (name: string, command: string[], opts: CommandOptions) => {
        const body = { ...commandBody(command, opts), ...(opts.stdin ? { stdin: await readStdin() } : {}) };
        await streamCommand(ctx, apiPath('sandboxes', name, 'exec'), body);
      }),
    );

  const run = new Command('run')
    .description("run a command in a fresh sandbox that is removed afterwards; streamed, with the command's exit code")
    .usage('[options] [--] <command...>')
    .argument('<command...>', "the command and its arguments; sandboxd's options end at its first word")
    .option('--image <image>', 'container image (default: chosen from the command, else the server default)')
    .option('--profile <profile>', `security profile: ${profile.options.join(', ')}`)
    .option('--workdir <dir>', 'working directory, absolute')
    .option('--env <K=V>', 'an environment variable; repeatable', collect)
    .option('--timeout <ms>', 'kill the command after this many milliseconds (default 300000)')
    .action(
      action(async (command: string[], opts: CommandOptions) => {
        const body = { ...commandBody(command, opts), ...(opts.image ? { image: opts.image } : {}), ...(opts.profile ? { profile: opts.profile } : {}) };
        await streamCommand(ctx, '/run', body);
      }),
    );
  return [exec, run];
}

function commandBody(command: string[], opts: CommandOptions) {
  return {
    command,
    ...(opts.workdir ? { workdir: opts.workdir } : {}),
    ...(opts.env ? { env: pairs(opts.env, '--env') } : {}),
    ...(opts.sudo ? { sudo: true } : {}),
    ...(opts.timeout ? { timeout_ms: integer(opts.timeout, '--timeout') } : {}),
  };
}

/**
 * Runs a command through a streaming route (`<path>/stream`): stdout and stderr chunks go to this process's
 * stdout and stderr as they arrive, and the exit code becomes this process's. Ctrl-C drops
 * the connection, which kills the command on the server. With `--json` the waiting route
 * (`path`) is used instead and its result printed whole (the exit code still propagates).
 */
export async function streamCommand(ctx: ClientContext, path: string, body: object): Promise<void> {
  const streaming: ApiRequest = { method: 'POST', path: `${path}/stream`, body };
  const waiting: ApiRequest = { method: 'POST', path, body };
  const connection = ctx.connection();
  if (ctx.flags.json) {
    const result = await connection.api.request<ExecResultBody>(waiting);
    printJson(result);
    process.exitCode = result.exit_code;
    return;
  }
  const abort = new AbortController();
  const interrupt = () => abort.abort();
  process.once('SIGINT', interrupt);
  try {
    const response = await connection.open({ ...streaming, accept: 'text/event-stream' }, abort.signal);
    for await (const event of sseEvents(response)) {
      const data = JSON.parse(event.data) as Record<string, unknown>;
      if (event.event === 'output') {
        (data.stream === 'stderr' ? process.stderr : process.stdout).write(String(data.content));
      } else if (event.event === 'done') {
        if (data.timed_out) process.stderr.write(`${dim(`sandboxd: the command timed out after ${String(data.duration_ms)} ms and was killed`, colours(process.stderr))}\n`);
        if (data.oom_killed) process.stderr.write(`${dim('sandboxd: the command ran out of memory and was killed', colours(process.stderr))}\n`);
        process.exitCode = Number(data.exit_code);
        return;
      } else if (event.event === 'error') {
        throw new Error(String(data.message));
      }
    }
    throw new Error('the server closed the stream before the command finished');
  } catch (err) {
    if (abort.signal.aborted) {
      process.exitCode = INTERRUPTED;
      return;
    }
    throw err;
  } finally {
    process.off('SIGINT', interrupt);
  }
}
