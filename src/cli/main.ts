#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { VERSION } from '../paths.js';
import { clientContext } from './client/client-context.js';
import { extractGlobalFlags } from './client/global-flags.js';
import { reportFailure } from './client/output.js';
import { completionCommands } from './completion-command.js';
import { cpCommand } from './cp-command.js';
import { execCommands } from './exec-command.js';
import { registerImagesCommand } from './images-command.js';
import { mcpCommand } from './mcp-command.js';
import { observeCommands } from './observe-command.js';
import { sandboxCommand } from './sandbox-command.js';
import { serveCommand } from './serve-command.js';
import { shellCommand } from './shell-command.js';
import { snapshotCommand } from './snapshot-command.js';
import { suggestionFor } from './suggestions.js';

let parsed;
try {
  parsed = extractGlobalFlags(process.argv.slice(2));
} catch (err) {
  reportFailure(err);
  process.exit();
}
const ctx = clientContext(parsed.flags);
// A reader that stops early (`sandboxd sandbox ls | head -1`) closes the pipe: end quietly, as Unix tools do.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code !== 'EPIPE') throw err;
  process.exit(process.exitCode ?? 0);
});

const program = new Command('sandboxd')
  .description('isolated sandboxes for untrusted commands: HTTP/JSON API, MCP tool server, CLI')
  .version(VERSION)
  .addHelpText(
    'after',
    '\nClient commands (sandbox, exec, run, shell, cp, logs, events, snapshot) take these anywhere before `--`:\n' +
      '  --server <url>    the server (default SANDBOXD_URL or SERVICE_URL, else the local server of <data-dir>/server.json, else http://127.0.0.1:18888)\n' +
      '  --api-key <key>   its API key (default SERVICE_API_KEY)\n' +
      "  --json            print the API's data as JSON",
  );
program.addCommand(serveCommand());
program.addCommand(mcpCommand());
registerImagesCommand(program);
program.addCommand(sandboxCommand(ctx));
for (const command of execCommands(ctx)) program.addCommand(command);
program.addCommand(cpCommand(ctx));
program.addCommand(shellCommand(ctx));
for (const command of observeCommands(ctx)) program.addCommand(command);
program.addCommand(snapshotCommand(ctx));
const [completion, complete] = completionCommands(program, ctx);
program.addCommand(completion);
program.addCommand(complete, { hidden: true });

// A usage error (unknown command or option, a missing argument) exits 2; help and --version exit 0.
const everyCommand = (command: Command): Command[] => [command, ...command.commands.flatMap(everyCommand)];
for (const command of everyCommand(program)) {
  command.exitOverride();
  // Usage errors say what to type instead: the closest command, sandboxd's name for a flag.
  command.configureOutput({
    outputError: (text, write) => {
      const commands = command.commands.map((sub) => sub.name()).filter((name) => !name.startsWith('__'));
      const hint = suggestionFor(text, commands);
      write(hint ? `${text.trimEnd()}\n${hint}\n` : text);
    },
  });
}
try {
  await program.parseAsync(parsed.args, { from: 'user' });
} catch (err) {
  if (!(err instanceof CommanderError)) throw err;
  process.exitCode = err.exitCode === 0 ? 0 : 2;
}
