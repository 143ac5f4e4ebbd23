import { Command } from 'commander';
import type WebSocket from 'ws';
import { apiPath } from '../client/api-client.js';
import { action, type ClientContext } from './client/client-context.js';
import { readStdin } from './client/inputs.js';
import { streamCommand } from './exec-command.js';

/**
 * Without a terminal on both ends the shell reads its commands from standard input, with no
 * terminal of its own: no prompt, no line editing, no colours or title escapes, lines ending in
 * `\n` (bash where the image has it, as on a terminal, else sh).
 */
const PIPED_SHELL = ['sh', '-c', 'if command -v bash >/dev/null 2>&1; then exec bash -s; else exec sh -s; fi'];

/** Ctrl-D: sent when piped input ends, so that the shell sees end of input as at a keyboard. */
const END_OF_INPUT = Buffer.from([4]);

/** `sandboxd shell NAME`: the sandbox's shell on this terminal, exiting with the shell's exit status. */
export function shellCommand(ctx: ClientContext): Command {
  return new Command('shell')
    .description(
      "open an interactive shell in a sandbox (as its default user, in its workdir); exits with the shell's exit status. " +
        'Piped (no terminal on both ends), the shell reads its commands from standard input, without a terminal',
    )
    .argument('<name>', 'sandbox name')
    .action(
      action(async (name: string) => {
        if (process.stdin.isTTY && process.stdout.isTTY) process.exitCode = await runShell(ctx, name);
        else await streamCommand(ctx, apiPath('sandboxes', name, 'exec'), { command: PIPED_SHELL, stdin: await readStdin() });
      }),
    );
}

/**
 * The terminal's output as this terminal should get it: the sandbox's terminal already ends
 * lines in `\r\n`, and this one (in Node's raw mode, which keeps ONLCR) turns each `\n` into
 * `\r\n` again, so `\r\n` goes out as `\n`. A `\r` at the end of a chunk waits for the next.
 */
export function lineEndings(): (data: Buffer) => Buffer {
  let held = false;
  return (data) => {
    const text = (held ? '\r' : '') + data.toString('latin1');
    held = text.endsWith('\r');
    return Buffer.from((held ? text.slice(0, -1) : text).replaceAll('\r\n', '\n'), 'latin1');
  };
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
  const output = lineEndings();
  stdin.setRawMode(true);
  stdout.on('resize', resize);
  stdin.on('data', send);
  stdin.once('end', ended);
  stdin.resume();
  try {
    return await session(ws, (data) => stdout.write(output(data)), (message) => stderr.write(`\nsandboxd: ${message}\n`));
  } finally {
    stdout.off('resize', resize);
    stdin.off('data', send);
    stdin.off('end', ended);
    stdin.setRawMode(false);
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
