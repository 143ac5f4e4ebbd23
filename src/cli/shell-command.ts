import { Command } from 'commander';
import type WebSocket from 'ws';
import { apiPath } from '../client/api-client.js';
import { action, type ClientContext } from './client/client-context.js';

/** Ctrl-D: sent when piped input ends, so that the shell sees end of input as at a keyboard. */
const END_OF_INPUT = Buffer.from([4]);

/** `sandboxd shell NAME`: the sandbox's shell on this terminal, exiting with the shell's exit status. */
export function shellCommand(ctx: ClientContext): Command {
  return new Command('shell')
    .description("open an interactive shell in a sandbox (as its default user, in its workdir); exits with the shell's exit status")
    .argument('<name>', 'sandbox name')
    .action(
      action(async (name: string) => {
        process.exitCode = await runShell(ctx, name);
      }),
    );
}

/**
 * Carries this terminal to the sandbox's: raw mode while the session lasts (every key goes to
 * the shell, Ctrl-C included), the window size at start and on each change (SIGWINCH), and the
 * terminal restored however the session ends.
 */
async function runShell(ctx: ClientContext, name: string): Promise<number> {
  const { stdin, stdout, stderr } = process;
  const size = () => ({ cols: stdout.columns || 80, rows: stdout.rows || 24 });
  const { cols, rows } = size();
  const ws = await ctx.connection().webSocket(`${apiPath('sandboxes', name, 'pty')}?cols=${cols}&rows=${rows}`);
  const resize = () => ws.send(JSON.stringify({ type: 'resize', ...size() }));
  const send = (data: Buffer) => ws.send(data, { binary: true });
  const ended = () => ws.readyState === ws.OPEN && send(END_OF_INPUT);
  if (stdin.isTTY) stdin.setRawMode(true);
  stdout.on('resize', resize);
  stdin.on('data', send);
  stdin.once('end', ended);
  stdin.resume();
  try {
    return await session(ws, (data) => stdout.write(data), (message) => stderr.write(`\r\nsandboxd: ${message}\r\n`));
  } finally {
    stdout.off('resize', resize);
    stdin.off('data', send);
    stdin.off('end', ended);
    if (stdin.isTTY) stdin.setRawMode(false);
    stdin.pause();
  }
}

/** Resolves with the shell's exit status once the socket closes (1 when it closed without one). */
function session(ws: WebSocket, write: (data: Buffer) => void, warn: (message: string) => void): Promise<number> {
  let exitCode: number | undefined;
  ws.on('message', (data: Buffer, isBinary: boolean) => {
    if (isBinary) return void write(data);
    const message = JSON.parse(data.toString('utf8')) as { type: string; exit_code?: number; message?: string };
    if (message.type === 'exit') exitCode = message.exit_code;
    else if (message.type === 'error') warn(message.message ?? 'error');
  });
  return new Promise((resolve) => {
    ws.once('close', (code, reason) => {
      if (exitCode === undefined) warn(`the terminal closed (${code}${reason.length ? `: ${reason.toString('utf8')}` : ''})`);
      resolve(exitCode ?? 1);
    });
  });
}
